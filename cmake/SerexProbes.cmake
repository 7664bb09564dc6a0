# SPDX-License-Identifier: MIT
# cmake/SerexProbes.cmake - the static probes (USDT). STUB (being written).
# Defines SEREX_PROBE_DEFINES: compile definitions for the library.
set(SEREX_PROBE_DEFINES)
