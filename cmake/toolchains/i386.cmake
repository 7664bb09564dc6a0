# SPDX-License-Identifier: MIT
# Linux i386 (32-bit x86) on an x86-64 Debian machine: the host gcc with
# -m32 (apt-get install gcc-multilib) and Debian's i386 packages through
# multiarch (dpkg --add-architecture i386; apt-get install libcmocka-dev:i386).
# A 32-bit time_t and 32-bit pointers: what serex must get right there.
#   cmake -S . -B build-i386 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/i386.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR i686)
set(CMAKE_C_COMPILER gcc)
set(CMAKE_CXX_COMPILER g++)
set(CMAKE_C_FLAGS_INIT -m32)
# Without a 32-bit libstdc++ (g++-multilib) C++ does not link: the C++
# header check in tests/CMakeLists.txt finds that and skips itself.
set(CMAKE_CXX_FLAGS_INIT -m32)
set(CMAKE_LIBRARY_ARCHITECTURE i386-linux-gnu)
# x86-64 runs i386 programs natively: no emulator.
