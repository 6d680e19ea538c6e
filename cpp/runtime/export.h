// Symbol export for libvdevrt. The library is built with hidden visibility; only declarations
// marked VDEV_RT_API form its ABI. (ELF only: the project targets Linux.)
#pragma once

#define VDEV_RT_API __attribute__((visibility("default")))
