/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: libFuzzer target for smcrctl's JSON reader (common/json.c): the
 * answer of a control socket, which smcrctl reads from whatever socket it
 * finds.  Whatever parses is walked with every accessor smcrctl uses. */
#include <config.h>

#include <string.h>

#include "fuzz.h"
#include "json.h"

static void walk(const struct json *j, unsigned depth)
{
	char buf[64];

	for (; j; j = j->next) {
		json_scalar_text(j, buf, sizeof(buf));
		FUZZ_REQUIRE(memchr(buf, '\0', sizeof(buf)));
		/* Scalars, and pairs of numbers (cursors). */
		FUZZ_REQUIRE(json_is_scalar(j) || j->type == JSON_ARR || j->type == JSON_OBJ);
		if (j->type == JSON_STR || j->type == JSON_NUM)
			FUZZ_REQUIRE(j->text);
		if (j->type == JSON_OBJ) {
			(void)json_get_str(j, "name", "");
			(void)json_get_u64(j, "pid", 0);
			(void)json_get_bool(j, "up", false);
			(void)json_get(j, "sections");
		}
		if (j->type == JSON_ARR || j->type == JSON_OBJ) {
			(void)json_count(j);
			if (depth < 64)
				walk(j->child, depth + 1);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[128];
	struct json *j;
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	err[0] = '\0';
	j = json_parse(s, err, sizeof(err));
	if (j)
		walk(j, 0);
	else
		FUZZ_REQUIRE(memchr(err, '\0', sizeof(err)));
	json_free(j);
	free(s);
	return 0;
}
