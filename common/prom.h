/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: smcrd's counters as Prometheus text (smcrctl metrics, smcrd
 * --metrics-listen). */
#ifndef SMCRBD_COMMON_PROM_H
#define SMCRBD_COMMON_PROM_H

#include <stdio.h>

#include "json.h"

/* One smcrd's status document. */
struct prom_doc {
	int pid;			/* label, or 0 */
	struct json *sec;		/* the smcrd section */
	struct json *stats;		/* libsmcr's counters, or NULL */
};

/* The families of nd documents into f (samples with a pid label where a
 * document's pid is not 0). */
void prom_print(FILE *f, const struct prom_doc *d, unsigned nd);

#endif
