/* SPDX-License-Identifier: BSD-3-Clause */
/* A library loaded at run time (dlopen) into a table of its functions:
 * GnuTLS at the first TLS session, librados and librbd at the first RBD
 * export.  Loaded once, never unloaded. */
#ifndef SMCRBD_DLSYMS_H
#define SMCRBD_DLSYMS_H

#include <stddef.h>

/* One function of the library: its name and the pointer it fills. */
struct dl_sym {
	const char *name;
	void **addr;
};

/* dlopen SONAME with FLAGS and fill every SYMS[i].addr.  0, -ELIBACC
 * (the library did not load; dlerror's text in err) or -ENOENT ("SONAME
 * has no NAME" in err). */
int dl_load(const char *soname, int flags, const struct dl_sym *syms, size_t n, char *err,
	    size_t errlen);

#endif
