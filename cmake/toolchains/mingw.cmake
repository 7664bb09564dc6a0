# SPDX-License-Identifier: MIT
# Windows x86-64, cross-compiled by mingw-w64's gcc (apt-get install
# mingw-w64), run by wine (apt-get install wine wine64). serex uses its Win32
# threads back end here. cmocka is not packaged for mingw: scripts/test.sh
# builds it with this file (scripts/build_cmocka.sh). Set WINEDEBUG=-all and
# a WINEPREFIX of your own before running ctest.
#   cmake -S . -B build-mingw -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/mingw.cmake
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(_serex_triple x86_64-w64-mingw32)

# The win32 threading model's gcc: no winpthreads DLL to carry along.
find_program(SEREX_MINGW_CC NAMES ${_serex_triple}-gcc-win32 ${_serex_triple}-gcc)
find_program(SEREX_MINGW_CXX NAMES ${_serex_triple}-g++-win32 ${_serex_triple}-g++)
set(CMAKE_C_COMPILER ${SEREX_MINGW_CC})
if(SEREX_MINGW_CXX)
  set(CMAKE_CXX_COMPILER ${SEREX_MINGW_CXX})
endif()
set(CMAKE_RC_COMPILER ${_serex_triple}-windres)

set(CMAKE_FIND_ROOT_PATH /usr/${_serex_triple})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Programs that need no DLL but the system's and serex's own.
foreach(_serex_kind EXE SHARED MODULE)
  set(CMAKE_${_serex_kind}_LINKER_FLAGS_INIT "-static-libgcc -static-libstdc++")
endforeach()

find_program(SEREX_WINE NAMES wine64 wine)
if(SEREX_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SEREX_WINE})
endif()
