/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: helpers shared by the blockdev and smcrd unit tests. */
#ifndef SMCR_TESTS_BD_UNIT_H
#define SMCR_TESTS_BD_UNIT_H

struct bd_transport;

/* Two TCP transports on the ends of a socketpair (a fatal assertion if
 * either cannot be made). */
void pair(struct bd_transport **a, struct bd_transport **b);

#endif
