# SPDX-License-Identifier: MIT
# The static probes (USDT, docs/probes.md) through <sys/sdt.h>. Sets, for
# CMakeLists.txt and tests/CMakeLists.txt:
#   SEREX_PROBE_DEFINES  compile definitions of the library: SEREX_HAVE_USDT=1
#                        when the probes are built, else nothing
#   SEREX_USDT_ENABLED   ON or OFF: whether they are
# Option SEREX_USDT: AUTO (the default) builds them on Linux when
# <sys/sdt.h> is found and a probe with a semaphore compiles; ON insists
# (a configure error without the header); OFF leaves them out. Cross
# builds take AUTO too: the target's include paths usually lack the header
# (Debian's i386, arm64 and mingw sysroots here), and then they are off.
include(CheckIncludeFile)
include(CheckCSourceCompiles)
include(CMakePushCheckState)

set(SEREX_USDT "AUTO" CACHE STRING
    "Static probes (USDT) through <sys/sdt.h>: AUTO (on for Linux when the header is found), ON or OFF")
set_property(CACHE SEREX_USDT PROPERTY STRINGS AUTO ON OFF)

string(TOUPPER "${SEREX_USDT}" _serex_usdt)
if(_serex_usdt MATCHES "^(ON|YES|TRUE|Y|1)$")
  set(_serex_usdt ON)
elseif(_serex_usdt MATCHES "^(OFF|NO|FALSE|N|0)$")
  set(_serex_usdt OFF)
elseif(NOT _serex_usdt STREQUAL "AUTO")
  message(FATAL_ERROR "SEREX_USDT must be AUTO, ON or OFF, not '${SEREX_USDT}'")
endif()

set(SEREX_USDT_ENABLED OFF)
set(SEREX_PROBE_DEFINES)
if(_serex_usdt STREQUAL "ON" OR
   (_serex_usdt STREQUAL "AUTO" AND CMAKE_SYSTEM_NAME STREQUAL "Linux"))
  # A failed check is made again at each configure (a header installed
  # since is found); a passed one is kept.
  foreach(_serex_var SEREX_HAVE_SYS_SDT_H SEREX_HAVE_SDT_PROBES)
    if(NOT ${_serex_var})
      unset(${_serex_var} CACHE)
    endif()
  endforeach()
  cmake_push_check_state(RESET)
  check_include_file(sys/sdt.h SEREX_HAVE_SYS_SDT_H)
  if(SEREX_HAVE_SYS_SDT_H)
    # What probe_internal.h does: a semaphore in .probes and a probe with
    # a 64-bit argument (a 32-bit target must find room for it).
    check_c_source_compiles([=[
      #include <stdint.h>
      #define _SDT_HAS_SEMAPHORES 1
      #include <sys/sdt.h>
      volatile unsigned short serex_check__probe_semaphore
          __attribute__((section(".probes"))) = 0;
      int main(int argc, char **argv) {
        uint64_t id = (uint64_t)argc << 40;
        int64_t ns = -(int64_t)argc;
        (void)argv;
        STAP_PROBE4(serex_check, _probe, (uintptr_t)&id, (uintptr_t)argv,
                    id, ns);
        return serex_check__probe_semaphore;
      }]=] SEREX_HAVE_SDT_PROBES)
  endif()
  cmake_pop_check_state()
  if(SEREX_HAVE_SYS_SDT_H AND SEREX_HAVE_SDT_PROBES)
    set(SEREX_USDT_ENABLED ON)
  elseif(_serex_usdt STREQUAL "ON")
    if(NOT SEREX_HAVE_SYS_SDT_H)
      message(FATAL_ERROR "SEREX_USDT=ON, but <sys/sdt.h> was not found: "
        "install it (Debian, Ubuntu: systemtap-sdt-dev; Fedora, RHEL: "
        "systemtap-sdt-devel; Arch: systemtap), or configure with "
        "-DSEREX_USDT=AUTO or OFF")
    else()
      message(FATAL_ERROR "SEREX_USDT=ON, but a probe of <sys/sdt.h> does "
        "not compile for this target (see CMakeFiles/CMakeError.log); "
        "configure with -DSEREX_USDT=OFF")
    endif()
  endif()
endif()

if(SEREX_USDT_ENABLED)
  set(SEREX_PROBE_DEFINES SEREX_HAVE_USDT=1)
  message(STATUS "serex: static probes (USDT): on")
else()
  message(STATUS "serex: static probes (USDT): off")
endif()
