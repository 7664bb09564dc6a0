/* SPDX-License-Identifier: MIT */
#include "probe.h"

int SEREX_PROBE_SYMBOL(void);
int SEREX_PROBE_SYMBOL(void)
{
    return (int)sizeof(void *);
}
