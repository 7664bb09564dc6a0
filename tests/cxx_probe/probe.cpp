// SPDX-License-Identifier: MIT
#include "probe.h"

extern "C" int SEREX_PROBE_SYMBOL(void);

int main()
{
    return SEREX_PROBE_SYMBOL() == static_cast<int>(sizeof(void *)) ? 0 : 1;
}
