/* tb_stream_bytes_choose: where outputs start going out with non-temporal stores, from the machine or
 * TB_STREAM_KB; and the process's choice is one of those. */
#include <criterion/criterion.h>

#include "layout.h"
#include "stream_bytes.h"

#include <stdlib.h>

Test(stream_bytes, machine_rule)
{
    int per = -1;
    cr_assert_eq(tb_stream_bytes_choose(NULL, 1, 2L << 20, &per), (size_t)1 << 20, "Intel: half of a 2 MiB L2");
    cr_assert_eq(per, 1, "Intel: for each writing thread");
    cr_assert_eq(tb_stream_bytes_choose(NULL, 1, 1L << 20, &per), (size_t)512 << 10, "Intel: half of a 1 MiB L2");
    cr_assert_eq(tb_stream_bytes_choose(NULL, 1, 0, &per), (size_t)1 << 20, "Intel, L2 unknown: 1 MiB");
    cr_assert_eq(tb_stream_bytes_choose(NULL, 1, -1, &per), (size_t)1 << 20, "Intel, sysconf failed: 1 MiB");
    cr_assert_eq(tb_stream_bytes_choose(NULL, 0, 2L << 20, &per), (size_t)16 << 20, "elsewhere: 16 MiB");
    cr_assert_eq(per, 0, "elsewhere: for the whole output");
}

Test(stream_bytes, env_overrides_only_when_whole)
{
    int per = -1;
    cr_assert_eq(tb_stream_bytes_choose("2048", 1, 2L << 20, &per), (size_t)2 << 20);
    cr_assert_eq(per, 0, "TB_STREAM_KB is for the whole output");
    cr_assert_eq(tb_stream_bytes_choose("16384", 0, 0, &per), (size_t)16 << 20);
    cr_assert_eq(tb_stream_bytes_choose("1", 0, 0, &per), (size_t)1 << 10);
    static const char *bad[] = {"", "0", "-4", "12k", "k", " ", "1073741825", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(tb_stream_bytes_choose(bad[i], 1, 2L << 20, &per), (size_t)1 << 20, "'%s' ignored (Intel)",
                     bad[i]);
        cr_assert_eq(per, 1);
        cr_assert_eq(tb_stream_bytes_choose(bad[i], 0, 2L << 20, &per), (size_t)16 << 20, "'%s' ignored", bad[i]);
    }
}

/* The process's threshold is what the rule gives for this machine and environment, fixed once, and scales
 * with the writing threads only where the rule is per thread. */
Test(stream_bytes, process_choice_follows_the_rule)
{
    int per = 0;
    const size_t want = tb_stream_bytes_here(getenv("TB_STREAM_KB"), &per);
    cr_assert_eq(tb_stream_bytes(), want);
    cr_assert_eq(tb_stream_bytes(), want, "decided once");
    cr_assert_eq(tb_stream_bytes_for(1), want);
    cr_assert_eq(tb_stream_bytes_for(16), per ? 16 * want : want);
    cr_assert(tb_stream_floats(want / sizeof(float), 1) && !tb_stream_floats(want / sizeof(float) - 1, 1));
    cr_assert_eq(tb_stream_floats(want / sizeof(float), 2), !per);
}
