# SPDX-License-Identifier: MIT
# The platform serex builds for: which threads back end (SEREX_THREADS), and
# whether 64-bit atomics need libatomic. Sets, for CMakeLists.txt:
#   SEREX_THREADS_DEFINE  SEREX_THREADS_C11, SEREX_THREADS_POSIX or
#                         SEREX_THREADS_WIN32 (compile definition)
#   SEREX_PLATFORM_LIBS   what the library links (threads, libatomic,
#                         libdl where dladdr lives there)
#   SEREX_PLATFORM_DEFINES  compile definitions of the platform layer:
#                         SEREX_HAVE_DLADDR=0 or 1 off Windows
include(CheckCSourceCompiles)
include(CMakePushCheckState)

set(SEREX_THREADS "auto" CACHE STRING
    "Threads back end: auto, c11, posix or win32 (auto: detected)")
set_property(CACHE SEREX_THREADS PROPERTY STRINGS auto c11 posix win32)

# ThreadSanitizer anywhere in the flags (ours, or a parent project's when
# serex is added with add_subdirectory) needs the POSIX back end. A parent's
# flags reach serex's targets through CMAKE_C_FLAGS[_<CONFIG>] (CFLAGS at
# the first configure included) and through the directory's COMPILE_OPTIONS,
# which add_subdirectory copies from the parent (add_compile_options()
# before add_subdirectory). Flags a parent gives only its own targets
# (target_compile_options) do not reach serex, and are not seen here.
set(_serex_all_flags "${SEREX_SANITIZE} ${CMAKE_C_FLAGS}")
foreach(_serex_cfg IN LISTS CMAKE_BUILD_TYPE CMAKE_CONFIGURATION_TYPES)
  string(TOUPPER "${_serex_cfg}" _serex_bt)
  string(APPEND _serex_all_flags " ${CMAKE_C_FLAGS_${_serex_bt}}")
endforeach()
get_directory_property(_serex_dir_opts COMPILE_OPTIONS)
string(APPEND _serex_all_flags " ${_serex_dir_opts}")
if(SEREX_SANITIZE MATCHES "thread" OR
   _serex_all_flags MATCHES "-fsanitize=[a-z,]*thread")
  set(SEREX_TSAN ON)
endif()

set(_serex_threads "${SEREX_THREADS}")
if(_serex_threads STREQUAL "auto")
  if(WIN32)
    set(_serex_threads win32)
  elseif(SEREX_TSAN)
    set(_serex_threads posix)
  else()
    cmake_push_check_state(RESET)
    set(CMAKE_REQUIRED_LIBRARIES Threads::Threads)
    check_c_source_compiles([=[
      #include <threads.h>
      static int run(void *arg) { (void)arg; return 0; }
      int main(void) {
        thrd_t t; mtx_t m; cnd_t c; tss_t k; once_flag o = ONCE_FLAG_INIT;
        (void)m; (void)c; (void)k; (void)o;
        if (thrd_create(&t, run, 0) != thrd_success) return 1;
        return thrd_join(t, 0) != thrd_success;
      }]=] SEREX_HAVE_C11_THREADS)
    cmake_pop_check_state()
    if(SEREX_HAVE_C11_THREADS)
      set(_serex_threads c11)
    else()
      set(_serex_threads posix)
    endif()
  endif()
endif()
if(NOT _serex_threads MATCHES "^(c11|posix|win32)$")
  message(FATAL_ERROR "SEREX_THREADS must be auto, c11, posix or win32, not '${SEREX_THREADS}'")
endif()
if(_serex_threads STREQUAL "c11" AND SEREX_TSAN)
  message(FATAL_ERROR "SEREX_THREADS=c11 cannot run under ThreadSanitizer: use posix")
endif()
string(TOUPPER "${_serex_threads}" _serex_up)
set(SEREX_THREADS_DEFINE SEREX_THREADS_${_serex_up})
set(SEREX_THREADS_USED ${_serex_threads})
message(STATUS "serex: threads back end: ${_serex_threads}")

if(_serex_threads STREQUAL "win32")
  set(SEREX_PLATFORM_LIBS)
else()
  set(SEREX_PLATFORM_LIBS Threads::Threads)
endif()

# 64-bit atomics: native on most targets; i486, ARMv5/6, MIPS32 and PPC32
# call __atomic_*_8 from libatomic. Checked, not assumed.
set(_serex_atomic_src [=[
  #include <stdatomic.h>
  #include <stdint.h>
  _Atomic uint64_t x;
  int main(void) {
    uint64_t e = 1;
    atomic_fetch_add_explicit(&x, 1, memory_order_relaxed);
    atomic_compare_exchange_strong(&x, &e, 2);
    return (int)atomic_load(&x);
  }]=])
cmake_push_check_state(RESET)
check_c_source_compiles("${_serex_atomic_src}" SEREX_HAVE_ATOMIC64)
if(NOT SEREX_HAVE_ATOMIC64)
  set(CMAKE_REQUIRED_LIBRARIES atomic)
  check_c_source_compiles("${_serex_atomic_src}" SEREX_HAVE_ATOMIC64_LIBATOMIC)
  if(SEREX_HAVE_ATOMIC64_LIBATOMIC)
    list(APPEND SEREX_PLATFORM_LIBS atomic)
  else()
    message(FATAL_ERROR "serex needs 64-bit atomics: none native, and no libatomic")
  endif()
endif()
cmake_pop_check_state()

# dladdr names functions in serex_dump (SEREX_DUMP_SYMBOLS): in the C
# library of glibc 2.34+, musl, macOS and the BSDs; in libdl
# (CMAKE_DL_LIBS) before glibc 2.34. libdl is linked only where dladdr
# needs it, and then it is in serex.pc (-ldl) and in the exported targets
# like libatomic. Found nowhere: serex_dump writes addresses only.
set(SEREX_PLATFORM_DEFINES)
if(NOT WIN32)
  include(CheckSymbolExists)
  cmake_push_check_state(RESET)
  set(CMAKE_REQUIRED_DEFINITIONS -D_GNU_SOURCE)
  check_symbol_exists(dladdr dlfcn.h SEREX_HAVE_DLADDR_LIBC)
  if(NOT SEREX_HAVE_DLADDR_LIBC AND CMAKE_DL_LIBS)
    set(CMAKE_REQUIRED_LIBRARIES ${CMAKE_DL_LIBS})
    check_symbol_exists(dladdr dlfcn.h SEREX_HAVE_DLADDR_LIBDL)
  endif()
  cmake_pop_check_state()
  if(SEREX_HAVE_DLADDR_LIBC)
    list(APPEND SEREX_PLATFORM_DEFINES SEREX_HAVE_DLADDR=1)
  elseif(SEREX_HAVE_DLADDR_LIBDL)
    list(APPEND SEREX_PLATFORM_DEFINES SEREX_HAVE_DLADDR=1)
    list(APPEND SEREX_PLATFORM_LIBS ${CMAKE_DL_LIBS})
  else()
    list(APPEND SEREX_PLATFORM_DEFINES SEREX_HAVE_DLADDR=0)
  endif()
endif()
