/* repo_dir.h — where the repository's data folders (plots/, devices/) are for a bench run from anywhere.
 * Threading: stateless (the caller's buffer).
 */
#ifndef TB_REPO_DIR_H
#define TB_REPO_DIR_H

#include <stddef.h>

/* Writes into buf (n bytes) and returns it: ./name when that folder exists, else the one beside the build
 * directory (<folder of this executable>/../name), else name. */
const char *repo_dir(const char *name, char *buf, size_t n);

#endif
