/*
 * test_config.c
 *		Unit tests for the YAML partition-map config (rs_config.c).
 */
#include <stdlib.h>
#include <string.h>

#include "rs_config.h"
#include "unit.h"

#define FREMIS_CONFIG \
	"version: \"v1\"\n" \
	"nodes:\n" \
	"- address: \"0.0.0.0:4003\"  # node1\n" \
	"  partition_start: 0\n" \
	"  partition_end: 127\n" \
	"- address: \"0.0.0.0:4004\"\n" \
	"  partition_start: 128\n" \
	"  partition_end: 255\n"

/* Parse a NUL-terminated document, for the common case. */
static rs_status
parse_str(const char *text, rs_config *config, rs_config_error *err)
{
	return rs_config_parse(text, strlen(text), config, err);
}

/* Check one parsed entry against its expected values. */
static void
check_entry(const char *what, const rs_config *config, size_t index,
			const char *address, int start, int end, int line)
{
	const rs_config_entry *entry;

	UNIT_CHECK(index < config->nentries, "%s: no entry %zu", what, index);
	if (index >= config->nentries)
		return;
	entry = &config->entries[index];
	UNIT_CHECK(entry->address != NULL && strcmp(entry->address, address) == 0,
			   "%s: entry %zu address \"%s\", want \"%s\"", what, index,
			   entry->address ? entry->address : "(null)", address);
	UNIT_CHECK(entry->partition_start == start, "%s: entry %zu start %d, want %d",
			   what, index, entry->partition_start, start);
	UNIT_CHECK(entry->partition_end == end, "%s: entry %zu end %d, want %d",
			   what, index, entry->partition_end, end);
	if (line > 0)
		UNIT_CHECK(entry->line == line, "%s: entry %zu line %d, want %d",
				   what, index, entry->line, line);
}

/*
 * Parse len bytes that must fail: check the status, the field, the line (if
 * want_line >= 0), that the message contains want_message, and that the
 * output was left empty.
 */
static void
expect_error_len(const char *what, const char *text, size_t len, rs_status want_status,
				 const char *want_field, int want_line, const char *want_message)
{
	rs_config	config = {(rs_config_entry *) 1, 99};
	rs_config_error err;
	rs_status	status;

	memset(&err, 0x5a, sizeof(err));
	status = rs_config_parse(text, len, &config, &err);
	UNIT_CHECK(status == want_status, "%s: status %s, want %s (message \"%s\")",
			   what, rs_status_text(status), rs_status_text(want_status),
			   status != RS_OK ? err.message : "");
	UNIT_CHECK(strcmp(err.field, want_field) == 0, "%s: field \"%s\", want \"%s\"",
			   what, err.field, want_field);
	if (want_line >= 0)
		UNIT_CHECK(err.line == want_line, "%s: line %d, want %d (message \"%s\")",
				   what, err.line, want_line, err.message);
	UNIT_CHECK(strstr(err.message, want_message) != NULL,
			   "%s: message \"%s\" lacks \"%s\"", what, err.message, want_message);
	UNIT_CHECK(err.message[0] != '\0' && err.message[strlen(err.message) - 1] != '.',
			   "%s: message \"%s\" empty or ends with a period", what, err.message);
	UNIT_CHECK(config.entries == NULL && config.nentries == 0,
			   "%s: output not left empty", what);
	if (status == RS_OK)
		rs_config_free(&config);
}

/* expect_error_len for a NUL-terminated document. */
static void
expect_error(const char *what, const char *text, rs_status want_status,
			 const char *want_field, int want_line, const char *want_message)
{
	expect_error_len(what, text, strlen(text), want_status, want_field, want_line,
					 want_message);
}

/* The FREMIS-N coordinator's config: two entries, exact values and lines. */
static void
test_fremis_config(void)
{
	rs_config	config;
	rs_config_error err;

	UNIT_EQ_INT(parse_str(FREMIS_CONFIG, &config, &err), RS_OK);
	UNIT_EQ_INT(config.nentries, 2);
	check_entry("fremis", &config, 0, "0.0.0.0:4003", 0, 127, 3);
	check_entry("fremis", &config, 1, "0.0.0.0:4004", 128, 255, 6);
	rs_config_free(&config);
	UNIT_CHECK(config.entries == NULL && config.nentries == 0, "free leaves it empty");
	rs_config_free(&config);	/* twice is fine */
}

/* Three nodes, keys in another order, plain version, unquoted addresses. */
static void
test_three_nodes(void)
{
	rs_config	config;
	rs_config_error err;
	const char *text =
		"nodes:\n"
		"  - partition_end: 99\n"
		"    address: db1.example.com:5432\n"
		"    partition_start: 0\n"
		"  - address: 'db2.example.com:5432'\n"
		"    partition_start: +100\n"
		"    partition_end: 199\n"
		"  - address: \"db3\"\n"
		"    partition_start: 200\n"
		"    partition_end: 255\n"
		"version: v1\n";

	UNIT_EQ_INT(parse_str(text, &config, &err), RS_OK);
	UNIT_EQ_INT(config.nentries, 3);
	check_entry("three", &config, 0, "db1.example.com:5432", 0, 99, 2);
	check_entry("three", &config, 1, "db2.example.com:5432", 100, 199, 5);
	check_entry("three", &config, 2, "db3", 200, 255, 8);
	rs_config_free(&config);
}

/* Flow style, whole and mixed with block style. */
static void
test_flow_style(void)
{
	rs_config	config;
	rs_config_error err;

	UNIT_EQ_INT(parse_str("{version: \"v1\", nodes: [{address: a, partition_start: 0, "
						  "partition_end: 0}, {address: \"b c\", partition_start: 1, "
						  "partition_end: 255}]}", &config, &err), RS_OK);
	UNIT_EQ_INT(config.nentries, 2);
	check_entry("flow", &config, 0, "a", 0, 0, 1);
	check_entry("flow", &config, 1, "b c", 1, 255, 1);
	rs_config_free(&config);

	UNIT_EQ_INT(parse_str("version: v1\n"
						  "nodes: [\n"
						  "  {address: x, partition_start: 5, partition_end: 6},\n"
						  "  {address: y,\n"
						  "   partition_start: 7, partition_end: 8}\n"
						  "]\n", &config, &err), RS_OK);
	UNIT_EQ_INT(config.nentries, 2);
	check_entry("mixed", &config, 0, "x", 5, 6, 3);
	check_entry("mixed", &config, 1, "y", 7, 8, 4);
	rs_config_free(&config);
}

/* Comments anywhere, a document marker and a BOM are all fine. */
static void
test_comments_and_markers(void)
{
	rs_config	config;
	rs_config_error err;

	UNIT_EQ_INT(parse_str("# partition map\n"
						  "---\n"
						  "version: v1 # the only version\n"
						  "# nodes follow\n"
						  "nodes: # two of them\n"
						  "  # first\n"
						  "  - address: a # inline\n"
						  "    # between fields\n"
						  "    partition_start: 0 # zero\n"
						  "    partition_end: 9\n"
						  "...\n"
						  "# trailing\n", &config, &err), RS_OK);
	UNIT_EQ_INT(config.nentries, 1);
	check_entry("comments", &config, 0, "a", 0, 9, 7);
	rs_config_free(&config);

	UNIT_EQ_INT(parse_str("\xEF\xBB\xBFversion: v1\nnodes: []\n", &config, &err), RS_OK);
	UNIT_EQ_INT(config.nentries, 0);
	rs_config_free(&config);

	UNIT_EQ_INT(parse_str("version: v1\r\nnodes:\r\n- address: a\r\n"
						  "  partition_start: 1\r\n  partition_end: 2\r\n",
						  &config, &err), RS_OK);
	check_entry("crlf", &config, 0, "a", 1, 2, 3);
	rs_config_free(&config);
}

/* An empty node list in both styles, and every way to spell v1. */
static void
test_empty_nodes_and_versions(void)
{
	rs_config	config;
	rs_config_error err;
	const char *versions[] = {
		"version: v1\nnodes: []\n",
		"version: \"v1\"\nnodes: []\n",
		"version: 'v1'\nnodes: []\n",
		"version: |-\n  v1\nnodes: []\n",
		"version: !!str v1\nnodes: []\n",
		"nodes: []\nversion: v1\n",
		"\"version\": v1\n'nodes': []\n",
	};
	size_t		i;

	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
	{
		rs_status	status = parse_str(versions[i], &config, &err);

		UNIT_CHECK(status == RS_OK, "version case %zu: %s (%s)", i,
				   rs_status_text(status), err.message);
		UNIT_EQ_INT(config.nentries, 0);
		UNIT_CHECK(config.entries == NULL, "empty list has no array");
		rs_config_free(&config);
	}

	/* err may be NULL */
	UNIT_EQ_INT(parse_str("version: v1\nnodes: []\n", &config, NULL), RS_OK);
	rs_config_free(&config);
	UNIT_EQ_INT(parse_str("version: v2\nnodes: []\n", &config, NULL), RS_ERR_INVALID);
	UNIT_EQ_INT(rs_config_parse("x", 1, NULL, &err), RS_ERR_INVALID);
	UNIT_EQ_INT(rs_config_parse(NULL, 3, &config, &err), RS_ERR_INVALID);
}

/* Missing, unknown and duplicate keys at the root and in a node. */
static void
test_key_errors(void)
{
	expect_error("missing version", "nodes: []\n", RS_ERR_INVALID, "version", 1,
				 "missing field \"version\"");
	expect_error("missing nodes", "# c\nversion: v1\n", RS_ERR_INVALID, "nodes", 2,
				 "missing field \"nodes\"");
	expect_error("empty root", "{}", RS_ERR_INVALID, "version", 1,
				 "missing field \"version\"");
	expect_error("unknown root", "version: v1\nnodes: []\nreplicas: 3\n",
				 RS_ERR_INVALID, "replicas", 3, "unknown field \"replicas\"");
	expect_error("duplicate version", "version: v1\nnodes: []\nversion: v1\n",
				 RS_ERR_DUPLICATE, "version", 3, "duplicate field \"version\"");
	expect_error("duplicate nodes", "version: v1\nnodes: []\nnodes: []\n",
				 RS_ERR_DUPLICATE, "nodes", 3, "duplicate field \"nodes\"");
	expect_error("non-scalar key", "? [a]\n: b\n", RS_ERR_INVALID, "", 1,
				 "field names must be scalars, got a sequence");

	expect_error("missing address",
				 "version: v1\nnodes:\n- address: a\n  partition_start: 0\n"
				 "  partition_end: 1\n- partition_start: 2\n  partition_end: 3\n",
				 RS_ERR_INVALID, "nodes[1].address", 6, "missing field \"address\"");
	expect_error("missing partition_start",
				 "version: v1\nnodes:\n- address: a\n  partition_end: 1\n",
				 RS_ERR_INVALID, "nodes[0].partition_start", 3,
				 "missing field \"partition_start\"");
	expect_error("missing partition_end",
				 "version: v1\nnodes:\n- address: a\n  partition_start: 1\n",
				 RS_ERR_INVALID, "nodes[0].partition_end", 3,
				 "missing field \"partition_end\"");
	expect_error("empty node", "version: v1\nnodes: [{}]\n", RS_ERR_INVALID,
				 "nodes[0].address", 2, "missing field \"address\"");
	expect_error("unknown node field",
				 "version: v1\nnodes:\n- address: a\n  weight: 2\n", RS_ERR_INVALID,
				 "nodes[0].weight", 4, "unknown field \"weight\"");
	expect_error("duplicate node field",
				 "version: v1\nnodes:\n- address: a\n  partition_start: 0\n"
				 "  partition_end: 1\n  address: b\n",
				 RS_ERR_DUPLICATE, "nodes[0].address", 6, "duplicate field \"address\"");
	expect_error("duplicate partition_end",
				 "version: v1\nnodes:\n- {address: a, partition_end: 1, "
				 "partition_end: 2}\n",
				 RS_ERR_DUPLICATE, "nodes[0].partition_end", 3,
				 "duplicate field \"partition_end\"");
	expect_error("unknown field with odd bytes",
				 "version: v1\nnodes: []\n\"a\\\"b\\tc\": 1\n", RS_ERR_INVALID,
				 "a\\\"b\\x09c", 3, "unknown field \"a\\\"b\\x09c\"");
}

/* Wrong types and wrong values for version and nodes. */
static void
test_value_errors(void)
{
	expect_error("version v2", "version: v2\nnodes: []\n", RS_ERR_INVALID, "version", 1,
				 "unsupported version \"v2\"; expected \"v1\"");
	expect_error("version number", "nodes: []\nversion: 1\n", RS_ERR_INVALID, "version",
				 2, "unsupported version \"1\"; expected \"v1\"");
	expect_error("version with space", "version: \"v1 \"\nnodes: []\n", RS_ERR_INVALID,
				 "version", 1, "unsupported version \"v1 \"");
	expect_error("version sequence", "version: [v1]\nnodes: []\n", RS_ERR_INVALID,
				 "version", 1, "version must be a string, got a sequence");
	expect_error("nodes scalar", "version: v1\nnodes: none\n", RS_ERR_INVALID, "nodes", 2,
				 "nodes must be a sequence, got a scalar");
	expect_error("nodes null", "version: v1\nnodes:\n", RS_ERR_INVALID, "nodes", -1,
				 "nodes must be a sequence, got null");
	expect_error("nodes mapping", "version: v1\nnodes: {a: b}\n", RS_ERR_INVALID, "nodes",
				 2, "nodes must be a sequence, got a mapping");
	expect_error("node scalar", "version: v1\nnodes:\n- a\n", RS_ERR_INVALID, "nodes[0]",
				 3, "nodes[0] must be a mapping, got a scalar");
	expect_error("node sequence",
				 "version: v1\nnodes:\n- {address: a, partition_start: 0, partition_end: 0}\n"
				 "- [x]\n", RS_ERR_INVALID, "nodes[1]", 4,
				 "nodes[1] must be a mapping, got a sequence");
	expect_error("root sequence", "- version: v1\n", RS_ERR_INVALID, "", 1,
				 "the document must be a mapping, got a sequence");
	expect_error("root scalar", "hello\n", RS_ERR_INVALID, "", 1,
				 "the document must be a mapping, got a scalar");
	expect_error("two documents", "version: v1\nnodes: []\n---\nversion: v1\nnodes: []\n",
				 RS_ERR_INVALID, "", 3, "expected a single document, found another");
}

/* Address rules: non-empty scalar, no NUL, at most 1024 bytes. */
static void
test_address_errors(void)
{
	char	   *text;
	size_t		prefix;
	rs_config	config;
	rs_config_error err;

	expect_error("address empty",
				 "version: v1\nnodes:\n- address: \"\"\n  partition_start: 0\n"
				 "  partition_end: 1\n", RS_ERR_INVALID, "nodes[0].address", 3,
				 "address must not be empty");
	expect_error("address null", "version: v1\nnodes:\n- address:\n", RS_ERR_INVALID,
				 "nodes[0].address", -1, "address must not be empty");
	expect_error("address mapping", "version: v1\nnodes:\n- address: {host: a}\n",
				 RS_ERR_INVALID, "nodes[0].address", 3,
				 "address must be a string, got a mapping");
	expect_error("address sequence", "version: v1\nnodes:\n- address: [a]\n",
				 RS_ERR_INVALID, "nodes[0].address", 3,
				 "address must be a string, got a sequence");
	expect_error("address NUL escape", "version: v1\nnodes:\n- address: \"a\\0b\"\n",
				 RS_ERR_INVALID, "nodes[0].address", 3,
				 "address must not contain a NUL byte");

	/* 1024 bytes are fine, 1025 are not */
	text = malloc(2000);
	prefix = (size_t) sprintf(text, "version: v1\nnodes:\n- address: ");
	memset(text + prefix, 'h', 1024);
	strcpy(text + prefix + 1024, "\n  partition_start: 0\n  partition_end: 0\n");
	UNIT_EQ_INT(parse_str(text, &config, &err), RS_OK);
	UNIT_CHECK(config.nentries == 1 && strlen(config.entries[0].address) == 1024,
			   "1024-byte address kept");
	rs_config_free(&config);
	memset(text + prefix, 'h', 1025);
	strcpy(text + prefix + 1025, "\n  partition_start: 0\n  partition_end: 0\n");
	expect_error("address too long", text, RS_ERR_TOO_LARGE, "nodes[0].address", 3,
				 "address is 1025 bytes long, over the limit of 1024");
	free(text);
}

/* Partition numbers: plain decimal integers in 0..255, start <= end. */
static void
test_partition_errors(void)
{
	rs_config	config;
	rs_config_error err;
	const struct
	{
		const char *value;
		rs_status	status;
		const char *message;
	}			cases[] = {
		{"abc", RS_ERR_INVALID, "partition_start must be an integer, got \"abc\""},
		{"\"5\"", RS_ERR_INVALID, "partition_start must be an integer, got the string \"5\""},
		{"'5'", RS_ERR_INVALID, "got the string \"5\""},
		{"0x10", RS_ERR_INVALID, "must be an integer, got \"0x10\""},
		{"1.5", RS_ERR_INVALID, "must be an integer, got \"1.5\""},
		{"1e2", RS_ERR_INVALID, "must be an integer, got \"1e2\""},
		{"1 2", RS_ERR_INVALID, "must be an integer, got \"1 2\""},
		{"+", RS_ERR_INVALID, "must be an integer, got \"+\""},
		{"--1", RS_ERR_INVALID, "must be an integer, got \"--1\""},
		{"1_0", RS_ERR_INVALID, "must be an integer, got \"1_0\""},
		{"007", RS_ERR_INVALID, "without leading zeros, got \"007\""},
		{"~", RS_ERR_INVALID, "partition_start must be an integer, got null"},
		{"[1]", RS_ERR_INVALID, "partition_start must be an integer, got a sequence"},
		{"{a: 1}", RS_ERR_INVALID, "partition_start must be an integer, got a mapping"},
		{"-1", RS_ERR_OUT_OF_RANGE, "partition_start -1 is outside 0..255"},
		{"256", RS_ERR_OUT_OF_RANGE, "partition_start 256 is outside 0..255"},
		{"+300", RS_ERR_OUT_OF_RANGE, "partition_start +300 is outside 0..255"},
		{"99999999999999999999999", RS_ERR_OUT_OF_RANGE,
		"partition_start 99999999999999999999999 is outside 0..255"},
	};
	size_t		i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		char		text[256];
		char		what[64];

		snprintf(text, sizeof(text),
				 "version: v1\nnodes:\n- address: a\n  partition_start: %s\n"
				 "  partition_end: 255\n", cases[i].value);
		snprintf(what, sizeof(what), "partition_start %s", cases[i].value);
		expect_error(what, text, cases[i].status, "nodes[0].partition_start", 4,
					 cases[i].message);
	}

	expect_error("partition_end 300",
				 "version: v1\nnodes:\n- address: a\n  partition_start: 0\n"
				 "  partition_end: 300\n", RS_ERR_OUT_OF_RANGE, "nodes[0].partition_end", 5,
				 "partition_end 300 is outside 0..255");
	expect_error("start after end",
				 "version: v1\nnodes:\n- address: a\n  partition_start: 0\n"
				 "  partition_end: 1\n- address: b\n  partition_end: 100\n"
				 "  partition_start: 200\n",
				 RS_ERR_INVALID, "nodes[1].partition_end", 7,
				 "partition_start 200 is greater than partition_end 100");

	/* edges that are fine: 0, 255, +0, -0, start == end */
	UNIT_EQ_INT(parse_str("version: v1\nnodes:\n"
						  "- {address: a, partition_start: 0, partition_end: 255}\n"
						  "- {address: b, partition_start: +0, partition_end: -0}\n"
						  "- {address: c, partition_start: 7, partition_end: 7}\n",
						  &config, &err), RS_OK);
	check_entry("edges", &config, 0, "a", 0, 255, 3);
	check_entry("edges", &config, 1, "b", 0, 0, 4);
	check_entry("edges", &config, 2, "c", 7, 7, 5);
	rs_config_free(&config);
}

/* Anchors and aliases are refused; an alias bomb costs nothing. */
static void
test_aliases(void)
{
	char	   *bomb;
	size_t		len = 0;
	int			level;

	expect_error("anchored version", "version: &v v1\nnodes: []\n", RS_ERR_INVALID,
				 "", 1, "aliases and anchors are not allowed");
	expect_error("alias version", "nodes: []\nversion: *v\n", RS_ERR_INVALID,
				 "", 2, "aliases and anchors are not allowed");
	expect_error("anchored node",
				 "version: v1\nnodes:\n- &n {address: a, partition_start: 0, "
				 "partition_end: 0}\n- *n\n", RS_ERR_INVALID, "", 3,
				 "aliases and anchors are not allowed");
	expect_error("alias address", "version: v1\nnodes:\n- address: *a\n",
				 RS_ERR_INVALID, "", 3, "aliases and anchors are not allowed");
	expect_error("alias key", "version: v1\nnodes: []\n*k : 1\n", RS_ERR_INVALID, "", 3,
				 "aliases and anchors are not allowed");
	expect_error("anchored root", "&r {version: v1, nodes: []}\n", RS_ERR_INVALID, "", 1,
				 "aliases and anchors are not allowed");

	/* The classic billion laughs: refused at its first anchor, never expanded. */
	bomb = malloc(4096);
	len += (size_t) sprintf(bomb + len, "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
	for (level = 1; level < 10; level++)
		len += (size_t) sprintf(bomb + len,
								"a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n",
								level, level, level - 1, level - 1, level - 1, level - 1,
								level - 1, level - 1, level - 1, level - 1, level - 1);
	expect_error_len("alias bomb", bomb, len, RS_ERR_INVALID, "", 1,
					 "aliases and anchors are not allowed");

	/* Hung under a valid key, after a structural error: the anchor still wins. */
	len = (size_t) sprintf(bomb, "version: v2\nnodes: &a0 [lol, lol, lol]\n");
	for (level = 1; level < 10; level++)
		len += (size_t) sprintf(bomb + len, "x%d: &a%d [*a%d, *a%d, *a%d, *a%d]\n",
								level, level, level - 1, level - 1, level - 1, level - 1);
	expect_error_len("alias bomb under nodes", bomb, len, RS_ERR_INVALID, "", 2,
					 "aliases and anchors are not allowed");
	free(bomb);
}

/* Deep nesting is a wrong-type error at its first level, never a crash. */
static void
test_deep_nesting(void)
{
	const size_t depth = 100000;
	char	   *text = malloc(2 * depth + 64);
	size_t		len;
	size_t		i;

	len = (size_t) sprintf(text, "version: v1\nnodes: ");
	memset(text + len, '[', depth);
	memset(text + len + depth, ']', depth);
	len += 2 * depth;
	expect_error_len("deep sequences", text, len, RS_ERR_INVALID, "nodes[0]", 2,
					 "nodes[0] must be a mapping, got a sequence");

	/* unclosed, so not even YAML: still only the wrong type, found quickly */
	len = (size_t) sprintf(text, "version: v1\nnodes: [{address: ");
	memset(text + len, '[', depth);
	len += depth;
	expect_error_len("deep unclosed", text, len, RS_ERR_INVALID, "nodes[0].address", 2,
					 "address must be a string, got a sequence");

	/* nesting the first pass still follows: the syntax error wins */
	len = (size_t) sprintf(text, "version: v1\nnodes: [[[[[[[[[[x]]]]]]]]]]\n: : :\n");
	expect_error_len("shallow nesting then bad syntax", text, len, RS_ERR_SYNTAX, "", 3, "");

	/* compact block sequences on one line */
	len = (size_t) sprintf(text, "version: v1\nnodes:\n");
	for (i = 0; i < depth / 2; i++)
		memcpy(text + len + 2 * i, "- ", 2);
	len += depth;
	len += (size_t) sprintf(text + len, "x\n");
	expect_error_len("deep block sequences", text, len, RS_ERR_INVALID, "nodes[0]", 3,
					 "nodes[0] must be a mapping, got a sequence");
	free(text);
}

/* libyaml's own errors: syntax, NUL bytes, bad UTF-8, empty input. */
static void
test_syntax_errors(void)
{
	rs_config	config;
	rs_config_error err;
	const char	nul_text[] = "version: v1\nno\0des: []\n";

	expect_error("unclosed flow", "version: v1\nnodes: [\n", RS_ERR_SYNTAX, "", -1,
				 "did not find expected");
	expect_error("nested mapping value", "version: v1\nnodes: a: b\n", RS_ERR_SYNTAX, "",
				 2, "mapping values are not allowed in this context");
	expect_error("bad indentation",
				 "version: v1\nnodes:\n- address: a\n partition_start: 0\n",
				 RS_ERR_SYNTAX, "", 4, "");
	expect_error("unclosed quote", "version: \"v1\nnodes: []\n", RS_ERR_SYNTAX, "", -1,
				 "found unexpected end of stream");
	expect_error("tab indent", "version: v1\nnodes:\n\t- a\n", RS_ERR_SYNTAX, "", 3,
				 "found character that cannot start any token");
	expect_error("bad escape", "version: \"\\q\"\nnodes: []\n", RS_ERR_SYNTAX, "", 1,
				 "found unknown escape character");

	rs_config_parse(nul_text, sizeof(nul_text) - 1, &config, &err);
	expect_error_len("NUL byte", nul_text, sizeof(nul_text) - 1, RS_ERR_SYNTAX, "", 2,
					 "control characters are not allowed");
	UNIT_EQ_INT(err.column, 3);
	expect_error_len("NUL at start", "\0", 1, RS_ERR_SYNTAX, "", 1,
					 "control characters are not allowed");
	expect_error("invalid UTF-8", "version: v1\nnodes: [\xff]\n", RS_ERR_SYNTAX, "", 2, "");
	expect_error("control byte", "version: v1\x01\nnodes: []\n", RS_ERR_SYNTAX, "", 1,
				 "control characters are not allowed");

	expect_error_len("empty input", "", 0, RS_ERR_INVALID, "", 0, "the config is empty");
	expect_error_len("NULL empty input", NULL, 0, RS_ERR_INVALID, "", 0,
					 "the config is empty");
	expect_error("only comments", "# nothing here\n\n", RS_ERR_INVALID, "", 0,
				 "the config is empty");
	expect_error("only marker", "---\n", RS_ERR_INVALID, "", -1,
				 "the document must be a mapping, got null");

	/* the text need not be NUL-terminated: only len bytes count */
	UNIT_EQ_INT(rs_config_parse("version: v1\nnodes: []\ngarbage: [", 22, &config, &err),
				RS_OK);
	rs_config_free(&config);
}

/* The size cap: 1 MiB parses, one byte more is refused before parsing. */
static void
test_size_limit(void)
{
	rs_config	config;
	rs_config_error err;
	char	   *text = malloc(RS_CONFIG_MAX_BYTES + 1);
	size_t		len;

	len = (size_t) sprintf(text, "version: v1\nnodes: []\n#");
	memset(text + len, 'x', RS_CONFIG_MAX_BYTES - len);
	UNIT_EQ_INT(rs_config_parse(text, RS_CONFIG_MAX_BYTES, &config, &err), RS_OK);
	rs_config_free(&config);

	text[RS_CONFIG_MAX_BYTES] = 'x';
	expect_error_len("over 1 MiB", text, RS_CONFIG_MAX_BYTES + 1, RS_ERR_TOO_LARGE, "",
					 0, "the config is 1048577 bytes, over the limit of 1048576");
	free(text);
}

/* A failure after some entries were read leaves nothing behind. */
static void
test_partial_failure(void)
{
	expect_error("third node bad",
				 "version: v1\nnodes:\n"
				 "- {address: a, partition_start: 0, partition_end: 1}\n"
				 "- {address: b, partition_start: 2, partition_end: 3}\n"
				 "- {address: c, partition_start: 4, partition_end: 300}\n",
				 RS_ERR_OUT_OF_RANGE, "nodes[2].partition_end", 5, "outside 0..255");
	expect_error("syntax after nodes",
				 "version: v1\nnodes:\n"
				 "- {address: a, partition_start: 0, partition_end: 1}\n"
				 "- {address: b, partition_start: 2, partition_end: 3}\n"
				 "]\n",
				 RS_ERR_SYNTAX, "", 5, "");
}

/* Format the FREMIS-N entries and compare with the expected text exactly. */
static void
test_format_fremis(void)
{
	rs_config_entry entries[] = {
		{"0.0.0.0:4003", 0, 127, 0},
		{"0.0.0.0:4004", 128, 255, 0},
	};
	char	   *text = NULL;
	size_t		len = 0;

	UNIT_EQ_INT(rs_config_format(entries, 2, &text, &len), RS_OK);
	UNIT_EQ_STR(text, "version: \"v1\"\n"
				"nodes:\n"
				"- address: \"0.0.0.0:4003\"\n"
				"  partition_start: 0\n"
				"  partition_end: 127\n"
				"- address: \"0.0.0.0:4004\"\n"
				"  partition_start: 128\n"
				"  partition_end: 255\n");
	UNIT_EQ_INT(len, text ? strlen(text) : 0);
	free(text);

	UNIT_EQ_INT(rs_config_format(NULL, 0, &text, &len), RS_OK);
	UNIT_EQ_STR(text, "version: \"v1\"\nnodes: []\n");
	UNIT_EQ_INT(len, strlen("version: \"v1\"\nnodes: []\n"));
	free(text);
}

/* Format then parse: every tricky address comes back byte for byte. */
static void
test_format_round_trip(void)
{
	rs_config_entry entries[] = {
		{"plain:5432", 0, 0, 0},
		{"with \"quotes\"", 1, 1, 0},
		{"back\\slash\\", 2, 2, 0},
		{"tab\there", 3, 3, 0},
		{"new\nline\r\n", 4, 4, 0},
		{"\xc3\xb1" "and\xc3\xba", 5, 5, 0},	/* ñandú */
		{"ctrl\x01\x1b\x7f", 6, 6, 0},
		{"c1 \xc2\x85 \xc2\x9f nbsp\xc2\xa0", 7, 7, 0},
		{"ls\xe2\x80\xa8ps\xe2\x80\xa9", 8, 8, 0},
		{"bom\xef\xbb\xbf fffe\xef\xbf\xbe ffff\xef\xbf\xbf", 9, 9, 0},
		{"emoji \xf0\x9f\x90\x98", 10, 10, 0},
		{"  spaced  ", 11, 11, 0},
		{"# not a comment", 12, 12, 0},
		{"- dash: colon", 13, 13, 0},
		{"'single'", 14, 14, 0},
		{"~", 15, 15, 0},
		{"null", 16, 16, 0},
		{"123", 17, 200, 0},
		{" ", 255, 255, 0},
	};
	size_t		n = sizeof(entries) / sizeof(entries[0]);
	char	   *text = NULL;
	char	   *again = NULL;
	size_t		len;
	size_t		againlen;
	size_t		i;
	rs_config	config;
	rs_config_error err;

	UNIT_EQ_INT(rs_config_format(entries, n, &text, &len), RS_OK);
	UNIT_CHECK(text != NULL && memchr(text, '\t', len) == NULL, "no raw tab written");
	UNIT_EQ_INT(rs_config_parse(text, len, &config, &err), RS_OK);
	UNIT_EQ_INT(config.nentries, n);
	for (i = 0; i < n && i < config.nentries; i++)
		check_entry("round trip", &config, i, entries[i].address,
					entries[i].partition_start, entries[i].partition_end, (int) (3 + 3 * i));

	/* formatting the parsed entries gives the same text */
	UNIT_EQ_INT(rs_config_format(config.entries, config.nentries, &again, &againlen),
				RS_OK);
	UNIT_CHECK(again != NULL && againlen == len && memcmp(text, again, len) == 0,
			   "format is stable");
	free(again);
	free(text);
	rs_config_free(&config);

	/* an empty list round-trips too */
	UNIT_EQ_INT(rs_config_format(NULL, 0, &text, &len), RS_OK);
	UNIT_EQ_INT(rs_config_parse(text, len, &config, &err), RS_OK);
	UNIT_EQ_INT(config.nentries, 0);
	free(text);
}

/* Format refuses entries that would not parse back. */
static void
test_format_errors(void)
{
	char	   *text = (char *) 1;
	size_t		len = 99;
	char		long_address[RS_CONFIG_MAX_ADDRESS_BYTES + 2];
	rs_config_entry entry = {"a", 0, 0, 0};
	rs_config_entry *many;
	size_t		i;

#define EXPECT_FORMAT_FAILS(entries, n, want) \
	do { \
		text = (char *) 1; \
		len = 99; \
		UNIT_EQ_INT(rs_config_format((entries), (n), &text, &len), (want)); \
		UNIT_CHECK(text == NULL && len == 0, "output cleared on failure"); \
	} while (0)

	entry.address = NULL;
	EXPECT_FORMAT_FAILS(&entry, 1, RS_ERR_INVALID);
	entry.address = "";
	EXPECT_FORMAT_FAILS(&entry, 1, RS_ERR_INVALID);
	entry.address = "bad \xff utf8";
	EXPECT_FORMAT_FAILS(&entry, 1, RS_ERR_INVALID);
	entry.address = "overlong \xc0\xaf";
	EXPECT_FORMAT_FAILS(&entry, 1, RS_ERR_INVALID);
	entry.address = "surrogate \xed\xa0\x80";
	EXPECT_FORMAT_FAILS(&entry, 1, RS_ERR_INVALID);
	entry.address = "a";
	entry.partition_start = 5;
	entry.partition_end = 4;
	EXPECT_FORMAT_FAILS(&entry, 1, RS_ERR_INVALID);
	entry.partition_end = 256;
	EXPECT_FORMAT_FAILS(&entry, 1, RS_ERR_OUT_OF_RANGE);
	entry.partition_start = -1;
	entry.partition_end = 0;
	EXPECT_FORMAT_FAILS(&entry, 1, RS_ERR_OUT_OF_RANGE);
	memset(long_address, 'x', sizeof(long_address) - 1);
	long_address[sizeof(long_address) - 1] = '\0';
	entry.address = long_address;
	entry.partition_start = 0;
	EXPECT_FORMAT_FAILS(&entry, 1, RS_ERR_TOO_LARGE);
	EXPECT_FORMAT_FAILS(NULL, 1, RS_ERR_INVALID);
	UNIT_EQ_INT(rs_config_format(&entry, 1, NULL, &len), RS_ERR_INVALID);

	/* too many entries, and output over the document cap */
	many = calloc(RS_CONFIG_MAX_NODES + 1, sizeof(rs_config_entry));
	for (i = 0; i <= RS_CONFIG_MAX_NODES; i++)
		many[i].address = "a";
	EXPECT_FORMAT_FAILS(many, RS_CONFIG_MAX_NODES + 1, RS_ERR_TOO_LARGE);
	long_address[RS_CONFIG_MAX_ADDRESS_BYTES] = '\0';
	for (i = 0; i < 1100; i++)
		many[i].address = long_address;
	EXPECT_FORMAT_FAILS(many, 1100, RS_ERR_TOO_LARGE);
	free(many);
#undef EXPECT_FORMAT_FAILS
}

int
main(void)
{
	test_fremis_config();
	test_three_nodes();
	test_flow_style();
	test_comments_and_markers();
	test_empty_nodes_and_versions();
	test_key_errors();
	test_value_errors();
	test_address_errors();
	test_partition_errors();
	test_aliases();
	test_deep_nesting();
	test_syntax_errors();
	test_size_limit();
	test_partial_failure();
	test_format_fremis();
	test_format_round_trip();
	test_format_errors();
	return unit_report();
}
