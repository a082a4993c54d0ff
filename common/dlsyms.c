/* SPDX-License-Identifier: BSD-3-Clause */
/* dl_load: a library's functions by name (dlsyms.h). */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "dlsyms.h"

int dl_load(const char *soname, int flags, const struct dl_sym *syms, size_t n, char *err,
	    size_t errlen)
{
	const char *e;
	void *h;
	size_t i;

	h = dlopen(soname, flags);
	if (!h) {
		e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "not found");
		return -ELIBACC;
	}
	for (i = 0; i < n; i++) {
		*syms[i].addr = dlsym(h, syms[i].name);
		if (!*syms[i].addr) {
			snprintf(err, errlen, "%s has no %s", soname, syms[i].name);
			return -ENOENT;
		}
	}
	return 0;
}
