/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: helpers shared by the blockdev and smcrd unit tests. */
#include <config.h>

#include <sys/socket.h>

#include "unit.h"
#include "bd-unit.h"
#include "transport.h"

void pair(struct bd_transport **a, struct bd_transport **b)
{
	int sv[2];

	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	CU_ASSERT_FATAL(bd_tcp_transport_new(sv[0], a) == 0);
	CU_ASSERT_FATAL(bd_tcp_transport_new(sv[1], b) == 0);
}
