#include "runtime/json_reader.h"

#include <cctype>
#include <cstdint>
#include <stdexcept>

#include "runtime/errors.h"

namespace vdev::rt {
namespace {

class Reader {
 public:
  Reader(const std::string& text, const std::string& source) : s_(text), source_(source) {}

  Json document() {
    Json v = value(0);
    skip_space();
    if (pos_ != s_.size()) error("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    fail<std::invalid_argument>("config", source_, " is not valid JSON: ", what, " at line ", line,
                                ", column ", column);
  }

  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool take(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c, const char* what) {
    if (!take(c)) error(std::string("expected ") + what);
  }

  bool take_word(const char* word) {
    const std::size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  Json value(int depth) {
    if (depth > 64) error("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) error("unexpected end of input");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind = Json::kObject;
      if (take('}')) return v;
      do {
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '"') error("expected a string key");
        std::string key = string();
        for (const auto& m : v.members) {
          if (m.first == key) error("duplicate key \"" + key + "\"");
        }
        expect(':', "':'");
        v.members.emplace_back(std::move(key), value(depth + 1));
      } while (take(','));
      expect('}', "',' or '}'");
    } else if (c == '[') {
      ++pos_;
      v.kind = Json::kArray;
      if (take(']')) return v;
      do {
        v.items.push_back(value(depth + 1));
      } while (take(','));
      expect(']', "',' or ']'");
    } else if (c == '"') {
      v.kind = Json::kString;
      v.text = string();
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      number(&v);
    } else if (take_word("true")) {
      v.kind = Json::kBool;
      v.boolean = true;
    } else if (take_word("false")) {
      v.kind = Json::kBool;
    } else if (take_word("null")) {
      v.kind = Json::kNull;
    } else {
      error("unexpected character '" + std::string(1, c) + "'");
    }
    return v;
  }

  void number(Json* v) {
    v->kind = Json::kNumber;
    const std::size_t start = pos_;
    v->negative = s_[pos_] == '-';
    if (v->negative) ++pos_;
    const std::size_t digits = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const unsigned d = static_cast<unsigned>(s_[pos_] - '0');
      if (v->magnitude > (~0ULL - d) / 10) v->fits = false;
      v->magnitude = v->magnitude * 10 + d;
      ++pos_;
    }
    if (pos_ == digits) error("expected a digit");
    if (s_[digits] == '0' && pos_ - digits > 1) error("a number with a leading zero");
    v->integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      v->integral = false;
      ++pos_;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        error("expected a digit after '.'");
      }
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      v->integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        error("expected a digit in the exponent");
      }
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    v->text = s_.substr(start, pos_ - start);
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) error("expected four hex digits after \\u");
    unsigned cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') {
        cp |= static_cast<unsigned>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        cp |= static_cast<unsigned>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        cp |= static_cast<unsigned>(h - 'A' + 10);
      } else {
        error("expected four hex digits after \\u");
      }
    }
    return cp;
  }

  static void append_utf8(std::string* out, unsigned cp) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) error("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) error("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) error("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            if (!take_word("\\u")) error("a lone surrogate in a string");
            const unsigned low = hex4();
            if (low < 0xDC00 || low >= 0xE000) error("a lone surrogate in a string");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            error("a lone surrogate in a string");
          }
          append_utf8(&out, cp);
          break;
        }
        default:
          error(std::string("an invalid escape '\\") + e + "'");
      }
    }
  }

  const std::string& s_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

}  // namespace

Json read_json(const std::string& text, const std::string& source) {
  return Reader(text, source).document();
}

}  // namespace vdev::rt
