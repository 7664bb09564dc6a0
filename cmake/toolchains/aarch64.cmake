# SPDX-License-Identifier: MIT
# Linux aarch64 (arm64), cross-compiled by clang with lld, run by qemu-user.
# Debian 12's gcc-aarch64-linux-gnu cannot be installed beside gcc-multilib,
# so the compiler is clang --target=aarch64-linux-gnu; the C library,
# libgcc and cmocka are Debian's arm64 packages, either installed through
# multiarch (dpkg --add-architecture arm64; apt-get install libc6-dev:arm64
# libgcc-12-dev:arm64 libcmocka-dev:arm64) or unpacked into a sysroot named
# by SEREX_AARCH64_SYSROOT (scripts/test.sh does the latter, under
# build-test/). Tests run through qemu-aarch64 -L <sysroot>.
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64.cmake \
#         -DSEREX_AARCH64_SYSROOT=/path/to/sysroot
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT SEREX_AARCH64_SYSROOT AND DEFINED ENV{SEREX_AARCH64_SYSROOT})
  set(SEREX_AARCH64_SYSROOT "$ENV{SEREX_AARCH64_SYSROOT}")
endif()
if(NOT SEREX_AARCH64_SYSROOT)
  set(SEREX_AARCH64_SYSROOT /) # multiarch: arm64 packages installed in /
endif()
# try_compile and the C++ probe re-read this file: give them the sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SEREX_AARCH64_SYSROOT)

set(_serex_triple aarch64-linux-gnu)
set(CMAKE_C_COMPILER clang)
set(CMAKE_C_COMPILER_TARGET ${_serex_triple})
set(CMAKE_CXX_COMPILER clang++)
set(CMAKE_CXX_COMPILER_TARGET ${_serex_triple})
set(CMAKE_LIBRARY_ARCHITECTURE ${_serex_triple})
foreach(_serex_kind EXE SHARED MODULE)
  set(CMAKE_${_serex_kind}_LINKER_FLAGS_INIT -fuse-ld=lld)
endforeach()

if(NOT SEREX_AARCH64_SYSROOT STREQUAL "/")
  set(CMAKE_SYSROOT ${SEREX_AARCH64_SYSROOT})
  set(CMAKE_FIND_ROOT_PATH ${SEREX_AARCH64_SYSROOT})
  set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
  set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
endif()

find_program(SEREX_QEMU_AARCH64 qemu-aarch64)
if(SEREX_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SEREX_QEMU_AARCH64} -L ${SEREX_AARCH64_SYSROOT})
endif()
