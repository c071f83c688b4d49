/* main.c - placeholder until the streaming core lands. */
#include "config.h"
#include <stdio.h>
int main(void)
{
    puts(PACKAGE_STRING);
    return 0;
}
