// SPDX-License-Identifier: MIT
// The public header compiles as C++ and links from C++ code.
#include <serex/serex.h>

#include <cstdio>

static void noop(void *) {}

int main()
{
    serex_executor *ex = nullptr;
    if (serex_manual_create(&ex) != SEREX_OK)
        return 1;
    if (serex_execute(ex, noop, nullptr) != SEREX_OK)
        return 1;
    bool ran = serex_manual_run_one(ex);
    int rc = serex_destroy(ex);
    std::printf("header_cxx: %s\n", serex_strerror(rc));
    return ran && rc == SEREX_OK ? 0 : 1;
}
