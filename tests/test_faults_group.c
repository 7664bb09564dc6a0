/* SPDX-License-Identifier: MIT */
/* (being written) */
int main(void)
{
    return 0;
}
