# SPDX-License-Identifier: MIT
# Linux x86-64 with musl instead of glibc: Debian's musl-gcc wrapper
# (apt-get install musl-tools). C only: there is no musl C++ library, so
# tests/CMakeLists.txt finds that the host's g++ builds for glibc and skips
# the C++ header check. cmocka is not packaged for musl: scripts/test.sh
# builds it with this file (scripts/build_cmocka.sh) and passes
# CMOCKA_INCLUDE_DIR and CMOCKA_LIBRARY.
#   cmake -S . -B build-musl -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/musl.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER musl-gcc)

# musl-gcc searches only musl's headers and libraries; nothing here calls
# find_library but for cmocka, which scripts/test.sh names exactly.
set(CMAKE_LIBRARY_ARCHITECTURE x86_64-linux-musl)
# x86-64 runs on this machine: no emulator.
