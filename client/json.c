/* smcrbd: a small JSON reader for smcrctl (see json.h). */
#include <config.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

struct parser {
	const char *p;
	char *err;
	size_t errlen;
	int depth;
};

static void fail(struct parser *ps, const char *what)
{
	if (ps->err && !ps->err[0])
		snprintf(ps->err, ps->errlen, "%s at '%.20s'", what, ps->p);
}

static void ws(struct parser *ps)
{
	while (*ps->p && isspace((unsigned char)*ps->p))
		ps->p++;
}

static struct json *node(enum json_type t)
{
	struct json *j = calloc(1, sizeof(*j));

	if (j)
		j->type = t;
	return j;
}

static void put_utf8(char **o, unsigned cp)
{
	char *q = *o;

	if (cp < 0x80) {
		*q++ = (char)cp;
	} else if (cp < 0x800) {
		*q++ = (char)(0xc0 | cp >> 6);
		*q++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*q++ = (char)(0xe0 | cp >> 12);
		*q++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*q++ = (char)(0x80 | (cp & 0x3f));
	}
	*o = q;
}

static char *string(struct parser *ps)
{
	const char *s = ++ps->p;
	char *out, *o;
	size_t n = 0;

	while (s[n] && s[n] != '"')
		n += s[n] == '\\' && s[n + 1] ? 2 : 1;
	if (s[n] != '"') {
		fail(ps, "unterminated string");
		return NULL;
	}
	out = o = malloc(n * 2 + 1);
	if (!out)
		return NULL;
	while (*ps->p != '"') {
		char c = *ps->p++;

		if (c != '\\') {
			*o++ = c;
			continue;
		}
		c = *ps->p++;
		switch (c) {
		case 'n': *o++ = '\n'; break;
		case 't': *o++ = '\t'; break;
		case 'r': *o++ = '\r'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'u': {
			char hex[5] = { 0 };
			unsigned cp;

			memcpy(hex, ps->p, 4);
			if (strlen(hex) != 4 || sscanf(hex, "%4x", &cp) != 1) {
				free(out);
				fail(ps, "bad \\u escape");
				return NULL;
			}
			ps->p += 4;
			put_utf8(&o, cp);
			break;
		}
		default: *o++ = c; break;
		}
	}
	ps->p++;
	*o = '\0';
	return out;
}

static struct json *value(struct parser *ps);

static struct json *container(struct parser *ps, bool obj)
{
	struct json *j = node(obj ? JSON_OBJ : JSON_ARR), **tail;

	if (!j)
		return NULL;
	tail = &j->child;
	ps->p++;
	ws(ps);
	if (*ps->p == (obj ? '}' : ']')) {
		ps->p++;
		return j;
	}
	for (;;) {
		char *key = NULL;
		struct json *v;

		ws(ps);
		if (obj) {
			if (*ps->p != '"') {
				fail(ps, "expected a member name");
				goto bad;
			}
			key = string(ps);
			if (!key)
				goto bad;
			ws(ps);
			if (*ps->p != ':') {
				free(key);
				fail(ps, "expected ':'");
				goto bad;
			}
			ps->p++;
		}
		v = value(ps);
		if (!v) {
			free(key);
			goto bad;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == (obj ? '}' : ']')) {
			ps->p++;
			return j;
		}
		fail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
		goto bad;
	}
bad:
	json_free(j);
	return NULL;
}

static struct json *value(struct parser *ps)
{
	struct json *j = NULL;

	ws(ps);
	if (++ps->depth > 64) {
		fail(ps, "nested too deeply");
		return NULL;
	}
	switch (*ps->p) {
	case '{':
	case '[':
		j = container(ps, *ps->p == '{');
		break;
	case '"':
		j = node(JSON_STR);
		if (j && !(j->text = string(ps))) {
			free(j);
			j = NULL;
		}
		break;
	case 't':
	case 'f':
	case 'n':
		if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "null", 4)) {
			j = node(*ps->p == 't' ? JSON_BOOL : JSON_NULL);
			if (j)
				j->b = *ps->p == 't';
			ps->p += 4;
		} else if (!strncmp(ps->p, "false", 5)) {
			j = node(JSON_BOOL);
			ps->p += 5;
		} else {
			fail(ps, "bad literal");
		}
		break;
	default:
		if (*ps->p == '-' || isdigit((unsigned char)*ps->p)) {
			const char *s = ps->p;

			ps->p++;
			while (*ps->p && strchr("0123456789.eE+-", *ps->p))
				ps->p++;
			j = node(JSON_NUM);
			if (j)
				j->text = strndup(s, (size_t)(ps->p - s));
		} else {
			fail(ps, "unexpected character");
		}
	}
	ps->depth--;
	return j;
}

struct json *json_parse(const char *s, char *err, size_t errlen)
{
	struct parser ps = { .p = s, .err = err, .errlen = errlen };
	struct json *j;

	if (err && errlen)
		err[0] = '\0';
	j = value(&ps);
	if (!j)
		return NULL;
	ws(&ps);
	if (*ps.p) {
		fail(&ps, "trailing data");
		json_free(j);
		return NULL;
	}
	return j;
}

void json_free(struct json *j)
{
	while (j) {
		struct json *next = j->next;

		json_free(j->child);
		free(j->key);
		free(j->text);
		free(j);
		j = next;
	}
}

struct json *json_get(const struct json *obj, const char *key)
{
	struct json *c;

	if (!obj || obj->type != JSON_OBJ)
		return NULL;
	for (c = obj->child; c; c = c->next)
		if (c->key && !strcmp(c->key, key))
			return c;
	return NULL;
}

const char *json_get_str(const struct json *obj, const char *key, const char *dflt)
{
	struct json *j = json_get(obj, key);

	return j && j->type == JSON_STR ? j->text : dflt;
}

uint64_t json_get_u64(const struct json *obj, const char *key, uint64_t dflt)
{
	struct json *j = json_get(obj, key);

	return j && j->type == JSON_NUM ? strtoull(j->text, NULL, 10) : dflt;
}

bool json_get_bool(const struct json *obj, const char *key, bool dflt)
{
	struct json *j = json_get(obj, key);

	return j && j->type == JSON_BOOL ? j->b : dflt;
}

unsigned json_count(const struct json *arr)
{
	const struct json *c;
	unsigned n = 0;

	if (!arr || (arr->type != JSON_ARR && arr->type != JSON_OBJ))
		return 0;
	for (c = arr->child; c; c = c->next)
		n++;
	return n;
}

bool json_is_scalar(const struct json *j)
{
	if (j->type == JSON_ARR) {
		const struct json *c;

		/* [a, b] of numbers: a cursor (wrap:count). */
		if (json_count(j) != 2)
			return false;
		for (c = j->child; c; c = c->next)
			if (c->type != JSON_NUM)
				return false;
		return true;
	}
	return j->type != JSON_OBJ;
}

void json_scalar_text(const struct json *j, char *buf, size_t len)
{
	switch (j->type) {
	case JSON_NULL: snprintf(buf, len, "-"); break;
	case JSON_BOOL: snprintf(buf, len, "%s", j->b ? "yes" : "no"); break;
	case JSON_NUM:
	case JSON_STR: snprintf(buf, len, "%s", j->text); break;
	case JSON_ARR:
		if (json_is_scalar(j)) {
			snprintf(buf, len, "%s:%s", j->child->text, j->child->next->text);
			break;
		}
		/* fall through */
	default: snprintf(buf, len, "..."); break;
	}
}
