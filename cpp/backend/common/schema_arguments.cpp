#include "backend/common/schema_arguments.h"

namespace vdev::backend {
namespace {

const c10::TypePtr& without_optional(const c10::TypePtr& t, bool& optional) {
  optional = t->kind() == c10::TypeKind::OptionalType;
  return optional ? t->expectRef<c10::OptionalType>().getElementType() : t;
}

}  // namespace

ArgumentType argument_type(const c10::TypePtr& type) {
  ArgumentType a{c10::TypeKind::AnyType};
  const c10::TypePtr& outer = without_optional(type, a.optional);
  if (outer->kind() != c10::TypeKind::ListType) {
    a.element = outer->kind();
    return a;
  }
  a.list = true;
  a.element =
      without_optional(outer->expectRef<c10::ListType>().getElementType(), a.optional_elements)
          ->kind();
  return a;
}

std::optional<std::size_t> written_argument(const c10::FunctionSchema& s, const c10::Argument& r) {
  if (r.alias_info() == nullptr) return std::nullopt;
  const auto& args = s.arguments();
  for (std::size_t j = 0; j < args.size(); ++j) {
    if (is_written(args[j]) && args[j].alias_info()->beforeSets() == r.alias_info()->beforeSets()) {
      return j;
    }
  }
  return std::nullopt;
}

std::optional<std::size_t> generator_argument(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ArgumentType t = argument_type(args[i].type());
    if (!t.list && t.is(c10::TypeKind::GeneratorType)) return i;
  }
  return std::nullopt;
}

}  // namespace vdev::backend
