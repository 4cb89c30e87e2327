/*
 * connection.c
 *		Connections from the coordinator to its nodes (see connection.h).
 *
 * The cache is keyed by server and local role, so a connection made for one
 * role never serves another (SET ROLE, a security definer function, the
 * watchdog replaying another role's write).  Entries are invalidated when
 * their server or user mapping changes, as postgres_fdw does, and the link is
 * closed once no transaction needs it.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_type.h"
#include "catalog/pg_user_mapping.h"
#include "common/hashfn.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "libpq/pqcomm.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bswap.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "remote/catalog.h"
#include "remote/connection.h"
#include "remote/stats.h"
#include "remote/values.h"
#include "routing/topology_cache.h"

/* The connections of this session, by (server, role). */
static HTAB *connections = NULL;

/*
 * Every result handed to a caller is tracked with the resource owner that
 * was current when it arrived, so that an error anywhere between its
 * arrival and the caller's remote_result_free() cannot leak it: when the
 * owner is released on abort, what it still holds is cleared; on commit of
 * a subtransaction it passes to the parent, as locks do.
 */
typedef struct TrackedResult
{
	PGresult   *result;
	ResourceOwner owner;
} TrackedResult;

static TrackedResult *tracked = NULL;
static int	ntracked = 0;
static int	tracked_capacity = 0;

static PGresult *
track_result(PGresult *result)
{
	if (result == NULL)
		return NULL;
	if (ntracked == tracked_capacity)
	{
		int			capacity = tracked_capacity ? tracked_capacity * 2 : 16;

		tracked = tracked ? repalloc(tracked, sizeof(TrackedResult) * capacity)
			: MemoryContextAlloc(TopMemoryContext, sizeof(TrackedResult) * capacity);
		tracked_capacity = capacity;
	}
	tracked[ntracked].result = result;
	tracked[ntracked].owner = CurrentResourceOwner;
	ntracked++;
	return result;
}

/* The connection keeps a result again (parked for another owner). */
static void
untrack_result(PGresult *result)
{
	for (int i = ntracked - 1; i >= 0 && result != NULL; i--)
		if (tracked[i].result == result)
		{
			tracked[i] = tracked[--ntracked];
			break;
		}
}

void
remote_result_free(PGresult *result)
{
	if (result == NULL)
		return;
	untrack_result(result);
	PQclear(result);
}

static void
release_tracked_results(ResourceReleasePhase phase, bool isCommit, bool isTopLevel, void *arg)
{
	ResourceOwner parent;

	if (phase != RESOURCE_RELEASE_AFTER_LOCKS)
		return;
	parent = ResourceOwnerGetParent(CurrentResourceOwner);
	for (int i = ntracked - 1; i >= 0; i--)
	{
		if (tracked[i].owner != CurrentResourceOwner)
			continue;
		if (isCommit && !isTopLevel && parent != NULL)
			tracked[i].owner = parent;
		else
		{
			PQclear(tracked[i].result);
			tracked[i] = tracked[--ntracked];
		}
	}
}

/* A result drained for an owner while another used the connection. */
typedef struct ParkedResult
{
	const void *owner;
	PGresult   *result;
	bool		ok;
} ParkedResult;

void
remote_clear_parked(RemoteConnection *c)
{
	ListCell   *lc;

	foreach(lc, c->parked)
	{
		ParkedResult *p = lfirst(lc);

		if (p->result)
			PQclear(p->result);
		pfree(p);
	}
	list_free(c->parked);
	c->parked = NIL;
}

static bool take_parked(RemoteConnection *c, const void *owner, RemoteResult *out);

/* Node name -> server, rebuilt when the topology changes. */
typedef struct NodeServer
{
	char		node[1025];		/* hash key: a node name (at most 1024 bytes) */
	Oid			serverid;
	bool		has_server;
} NodeServer;

static HTAB *node_servers = NULL;
static uint64 node_servers_generation = 0;

/* Milliseconds since a start time. */
static double
elapsed_ms(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_MILLISEC(now);
}

/* Remember a connection's last failure, replacing the previous one. */
static void
set_last_error(RemoteConnection *c, const char *error)
{
	char	   *copy = MemoryContextStrdup(TopMemoryContext, error ? error : "unknown error");
	int			len = strlen(copy);

	/* libpq messages end with a newline */
	while (len > 0 && copy[len - 1] == '\n')
		copy[--len] = '\0';
	if (c->last_error)
		pfree(c->last_error);
	c->last_error = copy;
	c->last_sqlstate = 0;
}

void
remote_set_error(RemoteConnection *c, const char *error)
{
	set_last_error(c, error);
}

/* A statement prepared on a link. */
typedef struct PreparedStatement
{
	char	   *sql;
	char		name[24];
} PreparedStatement;

static unsigned int statement_number = 0;

/* Statements die with their link. */
static void
forget_statements(RemoteConnection *c)
{
	ListCell   *lc;

	foreach(lc, c->statements)
	{
		PreparedStatement *ps = lfirst(lc);

		pfree(ps->sql);
		pfree(ps);
	}
	list_free(c->statements);
	c->statements = NIL;
	memset(c->texts_seen, 0, sizeof(c->texts_seen));
	c->texts_seen_next = 0;
}

/*
 * Whether the link sent this text once already (remote_send_execute);
 * remembered now if not.  Hashes only: a collision prepares a text on its
 * first use, which costs a round trip, nothing else.
 */
static bool
text_seen_before(RemoteConnection *c, const char *sql)
{
	uint32		hash = hash_bytes((const unsigned char *) sql, strlen(sql)) | 1;	/* 0: an empty slot */

	for (int i = 0; i < REMOTE_TEXTS_SEEN; i++)
		if (c->texts_seen[i] == hash)
			return true;
	c->texts_seen[c->texts_seen_next] = hash;
	c->texts_seen_next = (c->texts_seen_next + 1) % REMOTE_TEXTS_SEEN;
	return false;
}

/* The cell of the statement prepared on the link with this text, or NULL. */
static ListCell *
statement_cell(RemoteConnection *c, const char *sql)
{
	ListCell   *lc;

	foreach(lc, c->statements)
		if (strcmp(((PreparedStatement *) lfirst(lc))->sql, sql) == 0)
			return lc;
	return NULL;
}

/*
 * Moves on whenever a link is opened or closed: wait sets kept for sockets
 * (wait_sockets) are trusted only within one value.
 */
static uint64 socket_generation = 1;

static void
sockets_changed(void)
{
	socket_generation++;
}

/* Close a link and forget what was on it; it ends in state `link`. */
static void
close_link(RemoteConnection *c, RemoteLinkState link)
{
	forget_statements(c);
	if (c->conn)
		PQfinish(c->conn);
	c->conn = NULL;
	sockets_changed();
	c->link = link;
	if (c->counted_open)
		remote_stats_connection_closed(c->counted_open);
	c->counted_open = NULL;
	c->copying_in = false;
	c->owner = NULL;
	remote_clear_parked(c);
	if (c->partial)
		PQclear(c->partial);
	c->partial = NULL;
}

void
remote_disconnect(RemoteConnection *c)
{
	close_link(c, LINK_CLOSED);
}

void
remote_mark_broken(RemoteConnection *c, const char *why)
{
	if (why)
		set_last_error(c, why);
	remote_stats_failure(c->stats, REMOTE_FAILURE_LINK_LOST);
	close_link(c, LINK_BROKEN);
}

void
remote_set_xact(RemoteConnection *c, RemoteXactState state)
{
	if (state == RXACT_PREPARED && c->counted_prepared == NULL && c->stats)
	{
		remote_stats_prepared(c->stats, true);
		c->counted_prepared = c->stats;
	}
	else if (state != RXACT_PREPARED && c->counted_prepared)
	{
		remote_stats_prepared(c->counted_prepared, false);
		c->counted_prepared = NULL;
	}
	c->xact = state;
}

/*
 * At backend exit: the gauges of stat_nodes stop counting this backend's
 * links and prepared transactions (libpq's sockets just close with the
 * process; a prepared transaction left behind is recovery's, not ours).
 */
static bool
uncount_connection(RemoteConnection *c, void *arg)
{
	if (c->counted_open)
		remote_stats_connection_closed(c->counted_open);
	c->counted_open = NULL;
	if (c->counted_prepared)
		remote_stats_prepared(c->counted_prepared, false);
	c->counted_prepared = NULL;
	return true;
}

static void
uncount_connections_at_exit(int code, Datum arg)
{
	remote_foreach(uncount_connection, NULL);
}

/* A server or user mapping that changed, as the syscache invalidation names it. */
typedef struct CatalogChange
{
	int			cacheid;		/* FOREIGNSERVEROID or USERMAPPINGOID */
	uint32		hashvalue;		/* of the changed entry; 0: every entry */
} CatalogChange;

/*
 * A server or user mapping changed: connections that use it reconnect, now
 * if they are idle outside a transaction, otherwise when their transaction
 * ends (see the transaction callbacks).
 */
static bool
invalidate_if_changed(RemoteConnection *c, void *arg)
{
	const CatalogChange *change = arg;

	if (change->hashvalue == 0 ||
		(change->cacheid == FOREIGNSERVEROID && c->server_hash == change->hashvalue) ||
		(change->cacheid == USERMAPPINGOID && c->mapping_hash == change->hashvalue))
	{
		c->invalidated = true;
		if (c->conn && c->xact == RXACT_NONE && c->link == LINK_IDLE)
			remote_disconnect(c);
	}
	return true;
}

static void
remote_inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	CatalogChange change = {cacheid, hashvalue};

	remote_foreach(invalidate_if_changed, &change);
}

void
remote_connection_init(void)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(Oid) * 2;
	ctl.entrysize = sizeof(RemoteConnection);
	ctl.hcxt = TopMemoryContext;
	connections = hash_create("ringshard connections", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, remote_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, remote_inval_callback, (Datum) 0);
	RegisterResourceReleaseCallback(release_tracked_results, NULL);
}

/* Load node name -> server from ringshard.nodes (one catalog read per topology change). */
static void
load_node_servers(void)
{
	HASHCTL		ctl;
	bool		pushed = false;

	if (node_servers)
		hash_destroy(node_servers);
	ctl.keysize = sizeof(((NodeServer *) 0)->node);
	ctl.entrysize = sizeof(NodeServer);
	ctl.hcxt = TopMemoryContext;
	node_servers = hash_create("ringshard node servers", 16, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	node_servers_generation = topology_cache_generation;

	SPI_connect();
	if (!ActiveSnapshotSet())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pushed = true;
	}
	if (SPI_execute("SELECT node_name, server_name FROM ringshard.nodes", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read ringshard.nodes");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *node = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *server = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		NodeServer *entry;
		bool		found;

		if (strlen(node) >= sizeof(entry->node))
			continue;			/* the catalog refuses such names */
		entry = hash_search(node_servers, node, HASH_ENTER, &found);
		entry->has_server = server != NULL;
		entry->serverid = server ? get_foreign_server_oid(server, true) : InvalidOid;
		/* only a server of ringshard's wrapper: its validator keeps credentials out of it */
		if (OidIsValid(entry->serverid) &&
			GetForeignServer(entry->serverid)->fdwid != GetForeignDataWrapperByName("ringshard", false)->fdwid)
			entry->serverid = InvalidOid;
	}
	if (pushed)
		PopActiveSnapshot();
	SPI_finish();
}

Oid
remote_node_server(const char *node)
{
	NodeServer *entry = NULL;

	if (node_servers == NULL || node_servers_generation != topology_cache_generation)
		load_node_servers();
	if (strlen(node) < sizeof(entry->node))
		entry = hash_search(node_servers, node, HASH_FIND, NULL);
	if (entry == NULL || !entry->has_server || !OidIsValid(entry->serverid))
	{
		/* a node added or given an address since (in another session): read the catalog again */
		load_node_servers();
		if (strlen(node) < sizeof(entry->node))
			entry = hash_search(node_servers, node, HASH_FIND, NULL);
	}
	if (entry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node \"%s\" does not exist", node),
				 errhint("List nodes in ringshard.nodes.")));
	if (!entry->has_server)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node \"%s\" has no address", node),
				 errhint("Give it one with ringshard.set_node_address(node, 'host:port').")));
	if (!OidIsValid(entry->serverid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node \"%s\" has no server of the foreign-data wrapper ringshard", node),
				 errhint("Give the node an address again with ringshard.set_node_address().")));
	return entry->serverid;
}

/* A conninfo value, single-quoted with backslash escapes (libpq's rule). */
static void
append_conninfo_value(StringInfo buf, const char *value)
{
	appendStringInfoChar(buf, '\'');
	for (const char *c = value; *c; c++)
	{
		if (*c == '\'' || *c == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *c);
	}
	appendStringInfoChar(buf, '\'');
}

bool
remote_append_server_conninfo(StringInfo buf, const ForeignServer *server)
{
	bool		has_dbname = false;
	ListCell   *lc;

	foreach(lc, server->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, RINGSHARD_AMBIENT_OPTION) == 0)
			continue;			/* who gave the address, not a part of it */
		appendStringInfo(buf, "%s%s=", buf->len ? " " : "", d->defname);
		append_conninfo_value(buf, defGetString(d));
		has_dbname |= strcmp(d->defname, "dbname") == 0;
	}
	return has_dbname;
}

char *
remote_node_conninfo(const char *node)
{
	ForeignServer *server = GetForeignServer(remote_node_server(node));
	StringInfoData buf;

	initStringInfo(&buf);
	if (!remote_append_server_conninfo(&buf, server))
	{
		appendStringInfo(&buf, "%sdbname=", buf.len ? " " : "");
		append_conninfo_value(&buf, get_database_name(MyDatabaseId));
	}
	return buf.data;
}

RemoteConnection *
remote_connection(const char *node, Oid userid)
{
	Oid			key[2];
	RemoteConnection *c;
	bool		found;

	key[0] = remote_node_server(node);
	key[1] = userid;
	c = hash_search(connections, key, HASH_ENTER, &found);
	if (!found)
	{
		memset(((char *) c) + sizeof(key), 0, sizeof(RemoteConnection) - sizeof(key));
		c->link = LINK_CLOSED;
		c->xact = RXACT_NONE;
	}
	if (c->node == NULL || strcmp(c->node, node) != 0)
	{
		if (c->node)
			pfree(c->node);
		c->node = MemoryContextStrdup(TopMemoryContext, node);
		c->stats = remote_stats_slot(node);
	}
	/* A changed server or mapping takes effect once no transaction uses the link. */
	if (c->invalidated && c->xact == RXACT_NONE && c->link != LINK_BUSY && c->link != LINK_COPY_IN &&
		c->link != LINK_COPY_OUT)
	{
		remote_disconnect(c);
		c->invalidated = false;
	}
	return c;
}

void
remote_foreach(RemoteConnectionVisitor visit, void *arg)
{
	HASH_SEQ_STATUS scan;
	RemoteConnection *c;

	if (connections == NULL)
		return;
	hash_seq_init(&scan, connections);
	while ((c = hash_seq_search(&scan)) != NULL)
	{
		if (!visit(c, arg))
		{
			hash_seq_term(&scan);
			break;
		}
	}
}

bool
remote_may_see_addresses(void)
{
	Oid			admin = get_role_oid("ringshard_admin", true);

	return superuser() || (OidIsValid(admin) && has_privs_of_role(GetUserId(), admin));
}

/* libpq keywords a server or mapping may set, beside the ones we always set ourselves. */
static bool
keyword_is_ours(const char *keyword)
{
	return strcmp(keyword, "client_encoding") == 0 || strcmp(keyword, "fallback_application_name") == 0 ||
		strcmp(keyword, RINGSHARD_AMBIENT_OPTION) == 0;
}

/*
 * A path that names no file on any system (a file under /dev/null): libpq
 * then finds no password file, client certificate or key of the server
 * account's own.
 */
#define NO_SUCH_FILE "/dev/null/ringshard-offers-no-credential"

/* The keyword/value arrays of a connection: our defaults, the server's options, the mapping's, ours. */
typedef struct ConnParams
{
	const char *keywords[64];
	const char *values[64];
	int			n;
	bool		has_password;
	bool		password_required;
	bool		ambient_allowed;	/* the address is a superuser's: its own credentials may log in */
} ConnParams;

static void
add_param(ConnParams *p, const char *keyword, const char *value)
{
	if (p->n >= 62)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many connection options")));
	p->keywords[p->n] = keyword;
	p->values[p->n] = value;
	p->n++;
}

/*
 * The coordinator's tag in its node connections' application_name: 16 hex
 * digits of a hash of its id (docs/security.md keeps the id itself from
 * every role; any role on a node can read application_name).
 */
const char *
remote_coordinator_tag(void)
{
	static char tag[17];
	static char tagged_id[33];
	const char *id = catalog_coordinator_id();

	if (tag[0] == '\0' || strcmp(tagged_id, id) != 0)
	{
		uint64		hash = hash_bytes_extended((const unsigned char *) id, (int) strlen(id), 0x52494e47);

		snprintf(tag, sizeof(tag), "%016llx", (unsigned long long) hash);
		strlcpy(tagged_id, id, sizeof(tagged_id));
	}
	return tag;
}

static void
build_params(RemoteConnection *c, ConnParams *p)
{
	ForeignServer *server = GetForeignServer(c->serverid);
	UserMapping *mapping = NULL;
	char	   *remote_options = NULL;
	ListCell   *lc;
	char	   *timeout = psprintf("%d", Max(1, (ringshard_node_timeout_ms + 999) / 1000));
	char	   *keepalive_idle = psprintf("%d", Max(1, ringshard_node_timeout_ms / 1000));

	memset(p, 0, sizeof(*p));
	p->password_required = true;

	/* Defaults: the coordinator's database, the local role's name. */
	add_param(p, "dbname", get_database_name(MyDatabaseId));
	add_param(p, "user", GetUserNameFromId(c->userid, false));
	add_param(p, "connect_timeout", timeout);
	add_param(p, "keepalives", "1");
	add_param(p, "keepalives_idle", keepalive_idle);
	add_param(p, "keepalives_interval", "1");
	add_param(p, "keepalives_count", "3");

	/*
	 * The node's pg_stat_activity and log lines (%a) name the coordinator
	 * (by a tag derived from its id, which stays hidden) and the backend
	 * the connection works for: ringshard.cluster_activity joins them, and
	 * so can an operator reading the node's log.  A server's own
	 * application_name option, coming after, wins.
	 */
	if (IsTransactionState())
		add_param(p, "application_name", psprintf("ringshard %s %d", remote_coordinator_tag(), MyProcPid));

	foreach(lc, server->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, RINGSHARD_AMBIENT_OPTION) == 0)
			p->ambient_allowed = defGetBoolean(d);
		else if (strcmp(d->defname, "options") == 0)
			remote_options = defGetString(d);
		else if (!keyword_is_ours(d->defname))
			add_param(p, d->defname, defGetString(d));
	}

	/*
	 * An address that a role below superuser chose gets none of the server
	 * account's own credentials, from any role, the watchdog included: no
	 * password file (PGPASSFILE, ~/.pgpass), no client certificate or key,
	 * no Kerberos ticket.  Only what the role's user mapping says is
	 * offered (docs/security.md).  These come after the server's options:
	 * libpq takes the last value of a keyword.
	 */
	if (!p->ambient_allowed)
	{
		add_param(p, "passfile", NO_SUCH_FILE);
		add_param(p, "sslcert", NO_SUCH_FILE);
		add_param(p, "sslkey", NO_SUCH_FILE);
		add_param(p, "gssencmode", "disable");
		add_param(p, "krbsrvname", "ringshard-offers-no-kerberos-ticket");
	}

	if (OidIsValid(c->umid))
	{
		mapping = GetUserMapping(c->userid, c->serverid);
		foreach(lc, mapping->options)
		{
			DefElem    *d = lfirst(lc);

			if (strcmp(d->defname, "password_required") == 0)
				p->password_required = defGetBoolean(d);
			else
			{
				if (strcmp(d->defname, "password") == 0 && defGetString(d)[0] != '\0')
					p->has_password = true;
				add_param(p, d->defname, defGetString(d));
			}
		}
	}

	/*
	 * The remote session is fixed at connect, with no extra round trip:
	 * values then cross the link exactly (docs/design.md, invariant 5).
	 *
	 * A node backend whose coordinator backend died (a crash, kill -9)
	 * notices within a second even while it waits for a lock, and rolls
	 * back: it would otherwise hold its rows' locks for as long as it
	 * waits, then run the rest of the query string, a PREPARE TRANSACTION
	 * included, after recovery has looked.  (First, so that a server's
	 * options may say otherwise.)
	 */
	add_param(p, "options", psprintf("-c client_connection_check_interval=1000 %s%s"
									 "-c search_path=pg_catalog -c TimeZone=UTC " REMOTE_PINNED_SETTINGS,
									 remote_options ? remote_options : "", remote_options ? " " : ""));
	add_param(p, "client_encoding", GetDatabaseEncodingName());
	add_param(p, "fallback_application_name", "ringshard");
	p->keywords[p->n] = NULL;
	p->values[p->n] = NULL;
}

/*
 * libpq fills what a connection does not say from the environment: the
 * password from PGPASSWORD, and every option of the service PGSERVICE names
 * (from PGSERVICEFILE or the system's service file), a password among them.
 * For an address that gets none of the server account's credentials, those
 * two are hidden from libpq while it reads the parameters (it reads them
 * then, and only then; a backend is one thread).  An empty password
 * parameter would not do: libpq takes it for none.
 */
static PGconn *
connect_start(ConnParams *p)
{
	static const char *const hidden[] = {"PGPASSWORD", "PGSERVICE"};
	char	   *saved[lengthof(hidden)];
	PGconn	   *conn;

	sockets_changed();
	if (p->ambient_allowed)
		return PQconnectStartParams(p->keywords, p->values, false);
	for (int i = 0; i < lengthof(hidden); i++)
	{
		const char *value = getenv(hidden[i]);

		saved[i] = value ? strdup(value) : NULL;
		if (value && saved[i] == NULL)
		{
			for (int j = 0; j < i; j++)
				free(saved[j]);
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		}
	}
	for (int i = 0; i < lengthof(hidden); i++)
		if (saved[i])
			unsetenv(hidden[i]);
	conn = PQconnectStartParams(p->keywords, p->values, false);
	for (int i = 0; i < lengthof(hidden); i++)
		if (saved[i])
		{
			setenv(hidden[i], saved[i], 1);
			free(saved[i]);
		}
	return conn;
}

/*
 * A role below superuser may reach a node only with a password it supplied
 * in its user mapping, and only if the node asked for it: otherwise the
 * coordinator's own account (peer, trust, .pgpass, certificates) would log
 * in for it (postgres_fdw's rule).  A superuser may waive this on a mapping.
 */
static bool
check_password_given(RemoteConnection *c, ConnParams *p, bool missing_ok)
{
	const char *role = GetUserNameFromId(c->userid, false);
	const char *server = GetForeignServer(c->serverid)->servername;

	if ((superuser_arg(c->userid) && p->ambient_allowed) || !p->password_required)
		return true;
	/* with missing_ok (a probe of every node), one node's missing credentials only fail that node */
	if (!OidIsValid(c->umid))
	{
		if (missing_ok)
		{
			remote_mark_broken(c, psprintf("role \"%s\" has no user mapping for node \"%s\"", role, c->node));
			return false;
		}
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"%s\" has no user mapping for node \"%s\"", role, c->node),
				 superuser_arg(c->userid)
				 ? errdetail("The node's address was set by a role below superuser, so the coordinator offers it "
							 "none of the server account's own credentials.")
				 : 0,
				 errhint("CREATE USER MAPPING FOR %s SERVER %s OPTIONS (user '...', password '...');",
						 quote_identifier(role), quote_identifier(server))));
	}
	if (!p->has_password)
	{
		if (missing_ok)
		{
			remote_mark_broken(c, psprintf("password is required to connect to node \"%s\"", c->node));
			return false;
		}
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to connect to node \"%s\"", c->node),
				 superuser_arg(c->userid)
				 ? errdetail("The node's address was set by a role below superuser: a superuser too must give "
							 "a password in its user mapping.")
				 : errdetail("A role below superuser must give a password in its user mapping."),
				 errhint("Add it with ALTER USER MAPPING FOR %s SERVER %s OPTIONS (ADD password '...').",
						 quote_identifier(role), quote_identifier(server))));
	}
	return true;
}

static void
check_password_used(RemoteConnection *c, ConnParams *p)
{
	if ((superuser_arg(c->userid) && p->ambient_allowed) || !p->password_required)
		return;
	if (!PQconnectionUsedPassword(c->conn))
	{
		remote_mark_broken(c, "the node did not ask for the password");
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to connect to node \"%s\"", c->node),
				 errdetail("The node did not ask for the password of the user mapping, so another "
						   "credential of the coordinator's server account logged in."),
				 errhint("Configure the node to authenticate this user with a password (scram-sha-256 "
						 "in pg_hba.conf).")));
	}
}

/* The user mapping of a role for a server, or of PUBLIC; InvalidOid if none. */
static Oid
find_user_mapping(Oid userid, Oid serverid)
{
	HeapTuple	tuple;
	Oid			umid = InvalidOid;

	tuple = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(userid), ObjectIdGetDatum(serverid));
	if (!HeapTupleIsValid(tuple))
		tuple = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid), ObjectIdGetDatum(serverid));
	if (HeapTupleIsValid(tuple))
	{
		umid = ((Form_pg_user_mapping) GETSTRUCT(tuple))->oid;
		ReleaseSysCache(tuple);
	}
	return umid;
}

/*
 * Wait sets kept between waits.  Every round trip to a node waits on its
 * socket, and a wait set made for one wait costs an epoll descriptor made,
 * filled and closed (a tenth of the coordinator's time in a single-row
 * INSERT).  So the sets of the last few waits are kept, each for a set of
 * connections (in any order: a statement's replicas come in the key's
 * order, a commit's in the transaction's), and used again with their events
 * changed (ModifyWaitEvent).  A wait is for the sockets that have events:
 * a receive that has its answer from one replica waits for the other one
 * alone, which is another set.  With pgbench's TPC-B at R = 2 over three
 * nodes, sets kept for the same connections in the same order only were
 * made anew for 6 of every 10 waits.  A kept set names sockets by number,
 * and the kernel forgets a closed socket's entry: so a set is kept only for
 * connections that are established (libpq changes sockets only while it
 * connects or after it has lost one), and every link opened or closed here
 * (socket_generation) retires them all.
 */
#define KEPT_WAIT_SETS 16
#define KEPT_WAIT_SOCKETS 8

typedef struct KeptWaitSet
{
	WaitEventSet *set;
	uint64		generation;		/* socket_generation when it was made */
	uint64		last_use;
	int			n;
	PGconn	   *conns[KEPT_WAIT_SOCKETS];
	pgsocket	sockets[KEPT_WAIT_SOCKETS];
	uint32		events[KEPT_WAIT_SOCKETS];
} KeptWaitSet;

static KeptWaitSet kept_wait_sets[KEPT_WAIT_SETS];
static uint64 wait_uses = 0;

/*
 * A wait set for the latch, postmaster death and these sockets (those with
 * events), in cxt; nothing is left behind if making it fails.
 */
static WaitEventSet *
new_wait_set(PGconn **conns, uint32 *events, int n, MemoryContext cxt)
{
	WaitEventSet *volatile set = NULL;

	PG_TRY();
	{
		set = CreateWaitEventSet(cxt, n + 2);
		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		for (int i = 0; i < n; i++)
			if (events[i] != 0 && conns[i] != NULL && PQsocket(conns[i]) != PGINVALID_SOCKET)
				AddWaitEventToSet(set, events[i], PQsocket(conns[i]), NULL, NULL);
	}
	PG_CATCH();
	{
		if (set != NULL)
			FreeWaitEventSet(set);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return set;
}

/*
 * A kept wait set for exactly the connections that have events (in any
 * order; events set as asked), or NULL.
 */
static WaitEventSet *
kept_wait_set(PGconn **all_conns, uint32 *all_events, int all_n)
{
	KeptWaitSet *oldest = &kept_wait_sets[0];
	KeptWaitSet *k;
	PGconn	   *conns[KEPT_WAIT_SOCKETS];
	uint32		events[KEPT_WAIT_SOCKETS];
	int			at[KEPT_WAIT_SOCKETS];	/* where the kept set has conns[i] */
	int			n = 0;

	for (int i = 0; i < all_n; i++)
	{
		if (all_events[i] == 0 || all_conns[i] == NULL)
			continue;
		if (n == KEPT_WAIT_SOCKETS || PQstatus(all_conns[i]) != CONNECTION_OK ||
			PQsocket(all_conns[i]) == PGINVALID_SOCKET)
			return NULL;
		conns[n] = all_conns[i];
		events[n++] = all_events[i];
	}
	if (n < 1)
		return NULL;
	for (int j = 0; j < KEPT_WAIT_SETS; j++)
	{
		bool		same;

		k = &kept_wait_sets[j];
		if (k->set != NULL && k->generation != socket_generation)
		{
			FreeWaitEventSet(k->set);
			k->set = NULL;
		}
		/* the slot for a new set: an empty one, else the least recently used */
		if (oldest->set != NULL && (k->set == NULL || k->last_use < oldest->last_use))
			oldest = k;
		if (k->set == NULL || k->n != n)
			continue;
		same = true;
		for (int i = 0; i < n && same; i++)
		{
			at[i] = -1;
			for (int m = 0; m < n && at[i] < 0; m++)
				if (k->conns[m] == conns[i])
					at[i] = m;
			same = at[i] >= 0 && k->sockets[at[i]] == PQsocket(conns[i]);
		}
		if (!same)
			continue;
		/*
		 * Positions 0 and 1 are the latch and postmaster death; socket i is
		 * at 2 + i.  Unusable while it changes: a failed change (an ERROR
		 * from epoll) leaves it to be freed, not used.
		 */
		k->generation = 0;
		for (int i = 0; i < n; i++)
			if (k->events[at[i]] != events[i])
			{
				ModifyWaitEvent(k->set, 2 + at[i], events[i], NULL);
				k->events[at[i]] = events[i];
			}
		k->generation = socket_generation;
		k->last_use = ++wait_uses;
		return k->set;
	}
	/* a new one, in place of the least recently used; the slot holds it only once it is whole */
	k = oldest;
	if (k->set != NULL)
		FreeWaitEventSet(k->set);
	k->set = NULL;
	k->n = 0;
	k->set = new_wait_set(conns, events, n, TopMemoryContext);
	for (int i = 0; i < n; i++)
	{
		k->conns[i] = conns[i];
		k->sockets[i] = PQsocket(conns[i]);
		k->events[i] = events[i];
	}
	k->n = n;
	k->generation = socket_generation;
	k->last_use = ++wait_uses;
	return k->set;
}

/* Wait until one of the sockets is ready, the latch is set or the time is up. */
static void
wait_sockets(PGconn **conns, uint32 *events, int n, long timeout_ms)
{
	WaitEventSet *set = kept_wait_set(conns, events, n);
	bool		kept = set != NULL;
	WaitEvent	occurred[8];
	int			nready;

	if (!kept)
	{
		set = new_wait_set(conns, events, n, CurrentMemoryContext);
		PG_TRY();
		{
			nready = WaitEventSetWait(set, timeout_ms, occurred, lengthof(occurred), PG_WAIT_EXTENSION);
		}
		PG_FINALLY();
		{
			FreeWaitEventSet(set);
		}
		PG_END_TRY();
	}
	else
		nready = WaitEventSetWait(set, timeout_ms, occurred, lengthof(occurred), PG_WAIT_EXTENSION);
	for (int i = 0; i < nready; i++)
		if (occurred[i].events & WL_LATCH_SET)
			ResetLatch(MyLatch);
	/* every wait is interruptible: also when a busy socket wins over the latch */
	CHECK_FOR_INTERRUPTS();
}

/*
 * The hosts of a multi-host address, as libpq read them (PQconninfo: the
 * address's options, or the environment's where it says nothing), and how
 * far a connection to them got.
 *
 * libpq moves on to the next host of an address when one refuses or fails,
 * not when it does not answer: in non-blocking mode it applies no
 * connect_timeout, and the coordinator's deadline is its own.  So that a host
 * that accepts the TCP connection and stays silent (its machine frozen)
 * cannot hide the hosts after it, each host gets its own time limit: when
 * the host being tried runs out of it, a new attempt starts with the hosts
 * not tried yet, in order, with their ports (and hostaddrs) as they were.
 *
 * The limit for each host is ringshard.node_timeout itself, not a share of
 * it: a host is judged as it would be alone in an address, so listing a
 * standby after a primary does not shorten the time a loaded but working
 * primary has to answer (a share of it, floored, would fail such a primary
 * for having a standby), and node_timeout keeps its one meaning, how long
 * a node's server may take to answer.  A silent first host then costs one
 * node_timeout; an address whose every host is silent costs one per host,
 * and addresses list few hosts.
 */
typedef struct HostList
{
	int			n;				/* hosts of the address (libpq's count) */
	char	  **host;			/* host names, "" where none (nhost of them) */
	int			nhost;
	char	  **hostaddr;		/* numeric addresses, "" where none (n, or none) */
	int			nhostaddr;
	char	  **port;			/* ports: one for every host, or one each, or none */
	int			nport;
} HostList;

typedef struct ConnectAttempt
{
	HostList	hosts;
	int			first;			/* the first host of the current attempt */
	int			current;		/* the host libpq is trying */
	instr_time	since;			/* ... since then */
	char	   *seen_host;		/* PQhost() and PQport() when last looked at */
	char	   *seen_port;
	StringInfoData given_up;	/* what happened on the hosts of earlier attempts */
} ConnectAttempt;

/* Split a list on its commas, as libpq does (no quoting): nothing for NULL or "". */
static char **
split_host_list(const char *list, int *count)
{
	char	  **items;
	int			n = 1;
	int			k = 0;
	const char *start;

	*count = 0;
	if (list == NULL || list[0] == '\0')
		return NULL;
	for (const char *s = list; *s; s++)
		n += *s == ',';
	items = palloc(sizeof(char *) * n);
	start = list;
	for (const char *s = list;; s++)
		if (*s == ',' || *s == '\0')
		{
			items[k++] = pnstrdup(start, s - start);
			if (*s == '\0')
				break;
			start = s + 1;
		}
	*count = n;
	return items;
}

/* Elements from..count-1 of a list, joined again with commas. */
static char *
join_host_list(char **items, int count, int from)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = from; i < count; i++)
		appendStringInfo(&buf, "%s%s", i > from ? "," : "", items[i]);
	return buf.data;
}

/* The hosts a connection's address lists; n is 1 for a single-host address. */
static void
read_host_list(PGconn *conn, HostList *hosts)
{
	PQconninfoOption *options = PQconninfo(conn);
	const char *host = NULL;
	const char *hostaddr = NULL;
	const char *port = NULL;

	memset(hosts, 0, sizeof(*hosts));
	hosts->n = 1;
	if (options == NULL)
		return;
	for (PQconninfoOption *o = options; o->keyword; o++)
	{
		if (strcmp(o->keyword, "host") == 0)
			host = o->val;
		else if (strcmp(o->keyword, "hostaddr") == 0)
			hostaddr = o->val;
		else if (strcmp(o->keyword, "port") == 0)
			port = o->val;
	}
	hosts->host = split_host_list(host, &hosts->nhost);
	hosts->hostaddr = split_host_list(hostaddr, &hosts->nhostaddr);
	hosts->port = split_host_list(port, &hosts->nport);
	/* libpq's count: the hostaddrs if any, else the host names */
	hosts->n = hosts->nhostaddr > 0 ? hosts->nhostaddr : Max(hosts->nhost, 1);
	/* a list libpq would not take (it refused the address already): one host, no splitting */
	if (hosts->nhost > hosts->n || (hosts->nport > 1 && hosts->nport != hosts->n))
		hosts->n = 1;
	PQconninfoFree(options);
}

/* What PQhost() and PQport() say while libpq tries host i ("" when not known). */
static const char *
listed_host(HostList *hosts, int i)
{
	if (i < hosts->nhost && hosts->host[i][0] != '\0')
		return hosts->host[i];
	if (i < hosts->nhostaddr)
		return hosts->hostaddr[i];
	return "";
}

static const char *
listed_port(HostList *hosts, int i)
{
	if (hosts->nport == 1)
		return hosts->port[0];
	return i < hosts->nport ? hosts->port[i] : "";
}

/*
 * Which host libpq is on: the one PQhost()/PQport() name, the first such
 * from where it was (it goes through them in order).  When it moved on, the
 * new host's time starts.
 */
static void
follow_host(ConnectAttempt *a, PGconn *conn)
{
	const char *host = PQhost(conn) ? PQhost(conn) : "";
	const char *port = PQport(conn) ? PQport(conn) : "";
	bool		moved = a->seen_host != NULL;
	int			from;
	int			found = -1;

	if (moved && strcmp(host, a->seen_host) == 0 && strcmp(port, a->seen_port) == 0)
		return;
	from = moved ? a->current + 1 : a->first;
	for (int i = from; i < a->hosts.n && found < 0; i++)
	{
		const char *p = listed_port(&a->hosts, i);

		if (strcmp(listed_host(&a->hosts, i), host) == 0 && (p[0] == '\0' || port[0] == '\0' || strcmp(p, port) == 0))
			found = i;
	}
	/* a host libpq names otherwise (the default socket directory): the next one */
	if (found < 0)
		found = moved ? Min(from, a->hosts.n - 1) : a->first;
	a->current = found;
	INSTR_TIME_SET_CURRENT(a->since);
	if (a->seen_host)
	{
		pfree(a->seen_host);
		pfree(a->seen_port);
	}
	a->seen_host = pstrdup(host);
	a->seen_port = pstrdup(port);
}

/* Give a keyword a value in a copy of the parameters (every occurrence), or add it; false when full. */
static bool
set_param(ConnParams *p, const char *keyword, const char *value)
{
	bool		found = false;

	for (int i = 0; i < p->n; i++)
		if (strcmp(p->keywords[i], keyword) == 0)
		{
			p->values[i] = value;
			found = true;
		}
	if (found)
		return true;
	if (p->n >= 62)
		return false;
	p->keywords[p->n] = keyword;
	p->values[p->n] = value;
	p->n++;
	p->keywords[p->n] = NULL;
	p->values[p->n] = NULL;
	return true;
}

/*
 * The parameters of an attempt at hosts from..n-1 of an address: the same
 * but for host, hostaddr and port, cut to those hosts (a single port stays
 * as it is: libpq uses it for every host).  False if libpq could not read
 * the remaining lists as it read the whole ones: an empty value counts for
 * libpq as none, and it would fill it from the environment.
 */
static bool
params_from_host(const ConnParams *all, HostList *hosts, int from, ConnParams *out)
{
	const char *lists[3][2] = {{"host", NULL}, {"hostaddr", NULL}, {"port", NULL}};

	memcpy(out, all, sizeof(*out));
	if (hosts->nhost > 0)
		lists[0][1] = join_host_list(hosts->host, hosts->nhost, from);
	if (hosts->nhostaddr > 0)
		lists[1][1] = join_host_list(hosts->hostaddr, hosts->nhostaddr, from);
	if (hosts->nport > 1)
		lists[2][1] = join_host_list(hosts->port, hosts->nport, from);
	for (int i = 0; i < lengthof(lists); i++)
	{
		if (lists[i][1] == NULL)
			continue;
		if (lists[i][1][0] == '\0' || !set_param(out, lists[i][0], lists[i][1]))
			return false;
	}
	return true;
}

/*
 * What happened on the hosts of an attempt given up on, the one being tried
 * last: libpq's lines for those that failed, then this one's timeout.
 * libpq writes the start of a host's line ("connection to server at ...,
 * port ... failed: ") when it begins on the host, and clears it when the
 * connection is made: a message that does not end with a newline ends with
 * that start.
 */
static void
note_host_timeout(ConnectAttempt *a, PGconn *conn)
{
	const char *said = PQerrorMessage(conn);
	int			len = strlen(said);

	appendStringInfoString(&a->given_up, said);
	if (len == 0 || said[len - 1] == '\n')
		appendStringInfo(&a->given_up, "connection to server at \"%s\", port %s failed: ",
						 listed_host(&a->hosts, a->current), listed_port(&a->hosts, a->current));
	appendStringInfo(&a->given_up, "timeout while connecting (ringshard.node_timeout = %d ms for each host)\n",
					 ringshard_node_timeout_ms);
}

/* What an attempt's libpq said, after what happened on the hosts of earlier attempts. */
static char *
attempt_error(ConnectAttempt *a, PGconn *conn)
{
	if (a == NULL || a->given_up.len == 0)
		return PQerrorMessage(conn);
	return psprintf("%s%s", a->given_up.data, PQerrorMessage(conn));
}

void
remote_connect_all(RemoteConnection **conns, int n, bool missing_ok)
{
	instr_time	start;
	ConnParams *params = palloc0(sizeof(ConnParams) * Max(n, 1));
	bool	   *pending = palloc0(sizeof(bool) * Max(n, 1));
	ConnectAttempt **attempts = palloc0(sizeof(ConnectAttempt *) * Max(n, 1));
	PGconn	  **sockets = palloc0(sizeof(PGconn *) * Max(n, 1));
	uint32	   *events = palloc0(sizeof(uint32) * Max(n, 1));
	int			npending = 0;

	INSTR_TIME_SET_CURRENT(start);
	for (int i = 0; i < n; i++)
	{
		RemoteConnection *c = conns[i];
		HostList	hosts;

		/*
		 * A cached link outside any remote transaction may have died while
		 * idle (the node restarted, or its backend was terminated): reading
		 * what is there without waiting shows a closed socket, and a fresh
		 * connection replaces it.  A terminated backend sends its FATAL
		 * message before it closes: the first read takes that message (libpq
		 * treats an error while idle as a notice), the second meets the end
		 * of the stream.
		 */
		if (c->link == LINK_IDLE && c->xact == RXACT_NONE &&
			(!PQconsumeInput(c->conn) || !PQconsumeInput(c->conn) || PQstatus(c->conn) == CONNECTION_BAD))
			remote_disconnect(c);
		if (c->link != LINK_CLOSED)
			continue;
		c->umid = find_user_mapping(c->userid, c->serverid);
		{
			HeapTuple	tuple = SearchSysCache1(FOREIGNSERVEROID, ObjectIdGetDatum(c->serverid));

			if (!HeapTupleIsValid(tuple))
				elog(ERROR, "cache lookup failed for foreign server %u", c->serverid);
			ReleaseSysCache(tuple);
			c->server_hash = GetSysCacheHashValue1(FOREIGNSERVEROID, ObjectIdGetDatum(c->serverid));
			c->mapping_hash = OidIsValid(c->umid)
				? GetSysCacheHashValue1(USERMAPPINGOID, ObjectIdGetDatum(c->umid)) : 0;
		}
		build_params(c, &params[i]);
		if (!check_password_given(c, &params[i], missing_ok))
			continue;
		c->invalidated = false;
		c->conn = connect_start(&params[i]);
		if (c->conn == NULL || PQstatus(c->conn) == CONNECTION_BAD)
		{
			remote_mark_broken(c, c->conn ? PQerrorMessage(c->conn) : "out of memory");
			continue;
		}
		/* several hosts: each gets its own time (see HostList) */
		read_host_list(c->conn, &hosts);
		if (hosts.n > 1)
		{
			ConnectAttempt *a = palloc0(sizeof(ConnectAttempt));

			a->hosts = hosts;
			initStringInfo(&a->given_up);
			follow_host(a, c->conn);
			attempts[i] = a;
		}
		pending[i] = true;
		npending++;
	}

	/*
	 * Drive the handshakes together, within the node timeout: of the whole
	 * address for a single host, of the host being tried for several.
	 */
	while (npending > 0)
	{
		double		left_all = ringshard_node_timeout_ms - elapsed_ms(start);
		double		wait = 1000;

		for (int i = 0; i < n; i++)
		{
			RemoteConnection *c = conns[i];
			ConnectAttempt *a = attempts[i];
			PostgresPollingStatusType status;
			double		left;

			events[i] = 0;
			sockets[i] = NULL;
			if (!pending[i])
				continue;
			status = PQconnectPoll(c->conn);
			if (status == PGRES_POLLING_OK)
			{
				pending[i] = false;
				npending--;
				check_password_used(c, &params[i]);
				if (PQsetnonblocking(c->conn, 1) != 0)
				{
					remote_mark_broken(c, PQerrorMessage(c->conn));
					continue;
				}
				c->link = LINK_IDLE;
				if (c->stats)
				{
					static bool exit_callback_registered = false;

					if (!exit_callback_registered)
					{
						before_shmem_exit(uncount_connections_at_exit, (Datum) 0);
						exit_callback_registered = true;
					}
					remote_stats_connection_opened(c->stats);
					c->counted_open = c->stats;
				}
				continue;
			}
			if (a && status != PGRES_POLLING_FAILED)
				follow_host(a, c->conn);
			left = a ? ringshard_node_timeout_ms - elapsed_ms(a->since) : left_all;
			if (a && status != PGRES_POLLING_FAILED && left <= 0 && a->current + 1 < a->hosts.n)
			{
				/* the host being tried is silent: a new attempt with the hosts after it */
				ConnParams	rest;

				if (params_from_host(&params[i], &a->hosts, a->current + 1, &rest))
				{
					note_host_timeout(a, c->conn);
					PQfinish(c->conn);
					c->conn = NULL;
					params[i] = rest;
					c->conn = connect_start(&params[i]);
					if (c->conn == NULL || PQstatus(c->conn) == CONNECTION_BAD)
					{
						remote_mark_broken(c, c->conn ? attempt_error(a, c->conn) : "out of memory");
						pending[i] = false;
						npending--;
						continue;
					}
					a->first = a->current + 1;
					pfree(a->seen_host);
					pfree(a->seen_port);
					a->seen_host = a->seen_port = NULL;
					follow_host(a, c->conn);
					/* just started: libpq's next step waits until the socket is writable */
					sockets[i] = c->conn;
					events[i] = WL_SOCKET_WRITEABLE;
					continue;
				}
			}
			if (status == PGRES_POLLING_FAILED || left <= 0)
			{
				if (status == PGRES_POLLING_FAILED)
					remote_mark_broken(c, attempt_error(a, c->conn));
				else if (a)
				{
					note_host_timeout(a, c->conn);
					if (a->current + 1 < a->hosts.n)
						appendStringInfo(&a->given_up, "the %d host(s) after it were not tried: the address's host, "
										 "hostaddr or port list cannot be cut after it (it would end in an "
										 "empty element)\n", a->hosts.n - a->current - 1);
					remote_mark_broken(c, a->given_up.data);
				}
				else
					remote_mark_broken(c, psprintf("timeout while connecting (ringshard.node_timeout = %d ms)",
												   ringshard_node_timeout_ms));
				pending[i] = false;
				npending--;
				continue;
			}
			sockets[i] = c->conn;
			events[i] = status == PGRES_POLLING_WRITING ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE;
			wait = Min(wait, left);
		}
		if (npending > 0)
			wait_sockets(sockets, events, n, (long) Max(1, wait));
	}

	if (!missing_ok)
		for (int i = 0; i < n; i++)
			if (conns[i]->link == LINK_BROKEN)
				ereport(ERROR,
						(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
						 errmsg("could not connect to node \"%s\"", conns[i]->node),
						 errdetail_internal("%s", conns[i]->last_error)));
}

/* Drain the query in flight (of another owner) into a parked result for it. */
static void
park_pending(RemoteConnection *c)
{
	RemoteResult out;
	const void *owner = c->owner;

	remote_receive(&c, 1, &out, 0, 0);
	untrack_result(out.result);
	if (c->link != LINK_BROKEN)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		ParkedResult *p = palloc(sizeof(ParkedResult));

		p->owner = owner;
		p->result = out.result;
		p->ok = out.ok;
		c->parked = lappend(c->parked, p);
		MemoryContextSwitchTo(old);
	}
	else if (out.result)
		PQclear(out.result);
}

void
remote_forget_owner(RemoteConnection *c, const void *owner)
{
	RemoteResult out;

	if (c->link == LINK_BUSY && c->owner == owner)
	{
		remote_receive(&c, 1, &out, 0, 0);
		remote_result_free(out.result);
	}
	while (take_parked(c, owner, &out))
		remote_result_free(out.result);
}

bool
remote_owner_pending(RemoteConnection *c, const void *owner)
{
	ListCell   *lc;

	if (c->link == LINK_BUSY && c->owner == owner)
		return true;
	foreach(lc, c->parked)
		if (((ParkedResult *) lfirst(lc))->owner == owner)
			return true;
	return false;
}

/*
 * The START TRANSACTION that opens a node's transaction, added to buf.  The
 * node's transaction runs at the coordinator's isolation level.  At READ
 * COMMITTED each statement on the node takes its own snapshot, so an UPDATE
 * that waited for another writer's commit applies to the row that writer
 * left (as on one server) instead of failing with 40001; a fan-out then sees
 * one snapshot per node, as it always did (docs/guarantees.md).
 */
static void
open_transaction_text(RemoteConnection *c, StringInfo buf)
{
	appendStringInfoString(buf, IsolationIsSerializable()
						   ? "START TRANSACTION ISOLATION LEVEL SERIALIZABLE;"
						   : IsolationUsesXactSnapshot()
						   ? "START TRANSACTION ISOLATION LEVEL REPEATABLE READ;"
						   : "START TRANSACTION ISOLATION LEVEL READ COMMITTED;");
	remote_set_xact(c, RXACT_OPEN);
	c->xact_depth = 1;
}

/* A query goes out only on an idle link: on any other it is an error, with the link's last error. */
static void
require_idle_link(RemoteConnection *c)
{
	if (c->link != LINK_IDLE)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("node \"%s\" is not connected", c->node),
				 c->last_error ? errdetail_internal("%s", c->last_error) : 0));
}

/*
 * A query of `bytes` went out on c for owner: the link is busy with it, its
 * answer counts no results or writes yet, and its round trip starts now.
 */
static void
query_sent(RemoteConnection *c, size_t bytes, const void *owner)
{
	remote_stats_query_sent(c->stats, bytes);
	c->link = LINK_BUSY;
	c->owner = owner;
	c->ok_results = 0;
	c->answer_counts_writes = false;
	INSTR_TIME_SET_CURRENT(c->sent_at);
}

void
remote_send(RemoteConnection *c, const char *sql, bool in_transaction, const void *owner)
{
	StringInfoData buf;
	int			level = GetCurrentTransactionNestLevel();

	remote_flush_deferred(c);
	if (c->link == LINK_BUSY && c->owner != owner)
		park_pending(c);
	if (c->link == LINK_BUSY || c->link == LINK_COPY_IN || c->link == LINK_COPY_OUT)
		elog(ERROR, "ringshard: a query is still in flight on node \"%s\"", c->node);
	require_idle_link(c);
	initStringInfo(&buf);
	if (in_transaction)
	{
		if (c->xact == RXACT_FAILED || c->xact == RXACT_PREPARED)
			ereport(ERROR,
					(errcode(ERRCODE_IN_FAILED_SQL_TRANSACTION),
					 errmsg("the remote transaction on node \"%s\" failed earlier in this transaction", c->node),
					 c->last_error ? errdetail_internal("%s", c->last_error) : 0));
		if (c->xact == RXACT_NONE)
			open_transaction_text(c, &buf);
		/* Savepoints as deep as ours, so a rolled-back subtransaction rolls back here too. */
		while (c->xact_depth < level)
		{
			c->xact_depth++;
			appendStringInfo(&buf, "SAVEPOINT s%d;", c->xact_depth);
		}
	}
	appendStringInfoString(&buf, sql);
	if (!PQsendQuery(c->conn, buf.data))
	{
		remote_mark_broken(c, PQerrorMessage(c->conn));
		pfree(buf.data);
		return;
	}
	query_sent(c, buf.len, owner);
	pfree(buf.data);
}

/* The bytes of a query's text and parameters, for stat_nodes. */
static size_t
query_bytes(const char *sql, int nparams, const char *const *params)
{
	size_t		n = strlen(sql);

	for (int i = 0; i < nparams; i++)
		if (params[i])
			n += strlen(params[i]);
	return n;
}

void
remote_send_params(RemoteConnection *c, const char *sql, int nparams, const char *const *params,
				   bool in_transaction, const void *owner)
{
	if (nparams == 0)
	{
		remote_send(c, sql, in_transaction, owner);
		return;
	}
	remote_flush_deferred(c);
	if (in_transaction && (c->xact == RXACT_NONE || c->xact_depth < GetCurrentTransactionNestLevel()))
		remote_result_free(remote_exec(c, "", true));	/* opens the transaction and its savepoints */
	if (c->link == LINK_BUSY && c->owner != owner)
		park_pending(c);
	require_idle_link(c);
	if (in_transaction && (c->xact == RXACT_FAILED || c->xact == RXACT_PREPARED))
		ereport(ERROR,
				(errcode(ERRCODE_IN_FAILED_SQL_TRANSACTION),
				 errmsg("the remote transaction on node \"%s\" failed earlier in this transaction", c->node)));
	if (!PQsendQueryParams(c->conn, sql, nparams, NULL, params, NULL, NULL, 0))
	{
		remote_mark_broken(c, PQerrorMessage(c->conn));
		return;
	}
	query_sent(c, query_bytes(sql, nparams, params), owner);
}

bool
remote_can_send_prepared(RemoteConnection *c, bool in_transaction)
{
	if (c->link != LINK_IDLE && c->link != LINK_BUSY)
		return false;
	if (!in_transaction)
		return c->xact == RXACT_NONE;
	return c->xact == RXACT_OPEN && c->xact_depth == GetCurrentTransactionNestLevel();
}

/*
 * The statement prepared on this link with this text, prepared now (one
 * round trip, on an idle link) if it is not yet; NULL if the link broke.
 * ERROR if the node refuses it.  The set is bounded: the least recently
 * used goes when there are many.
 */
static PreparedStatement *
prepared_statement(RemoteConnection *c, const char *sql, int nparams)
{
	PreparedStatement *ps;
	char		name[sizeof(ps->name)];
	ListCell   *lc;
	MemoryContext old;
	RemoteResult out;

	lc = statement_cell(c, sql);
	if (lc != NULL)
	{
		/* the last used goes to the end: the one dropped is the least recently used */
		ps = lfirst(lc);
		if (lnext(c->statements, lc) != NULL)
		{
			old = MemoryContextSwitchTo(TopMemoryContext);
			c->statements = lappend(list_delete_cell(c->statements, lc), ps);
			MemoryContextSwitchTo(old);
		}
		return ps;
	}
	if (list_length(c->statements) >= REMOTE_PREPARED_MAX)
	{
		PreparedStatement *oldest = linitial(c->statements);
		char	   *deallocate = psprintf("DEALLOCATE %s", oldest->name);

		/* off the list first: if the DEALLOCATE fails, no later call sends it again */
		c->statements = list_delete_first(c->statements);
		pfree(oldest->sql);
		pfree(oldest);
		remote_result_free(remote_exec(c, deallocate, false));
	}
	/*
	 * Kept (in TopMemoryContext) only once the node took it: an error or an
	 * interrupt before leaves nothing here (the node may still have it, under
	 * a name never used again, until the link closes).
	 */
	snprintf(name, sizeof(name), "ringshard_s%u", ++statement_number);
	if (!PQsendPrepare(c->conn, name, sql, nparams, NULL))
	{
		remote_mark_broken(c, PQerrorMessage(c->conn));
		return NULL;
	}
	query_sent(c, strlen(sql), c);
	remote_receive(&c, 1, &out, 0, 0);
	if (!out.ok)
	{
		if (out.result && !out.lost)
			remote_report_error(ERROR, c, out.result, sql);
		return NULL;
	}
	/* a Parse is answered by ParseComplete alone */
	if (out.result == NULL || PQresultStatus(out.result) != PGRES_COMMAND_OK)
	{
		const char *status = out.result ? PQresStatus(PQresultStatus(out.result)) : "nothing";

		remote_result_free(out.result);
		remote_reject_answer(c, "a statement prepared on it", psprintf("%s where PGRES_COMMAND_OK was expected",
																	   status));
	}
	remote_result_free(out.result);
	old = MemoryContextSwitchTo(TopMemoryContext);
	ps = palloc(sizeof(PreparedStatement));
	ps->sql = pstrdup(sql);
	strlcpy(ps->name, name, sizeof(ps->name));
	c->statements = lappend(c->statements, ps);
	MemoryContextSwitchTo(old);
	return ps;
}

void
remote_send_prepared(RemoteConnection *c, const char *sql, int nparams, const char *const *params,
					 const void *owner)
{
	PreparedStatement *ps;

	remote_flush_deferred(c);
	if (c->link == LINK_BUSY && c->owner != owner)
		park_pending(c);
	require_idle_link(c);
	ps = prepared_statement(c, sql, nparams);
	if (ps == NULL)
		return;
	if (!PQsendQueryPrepared(c->conn, ps->name, nparams, params, NULL, NULL, 0))
	{
		remote_mark_broken(c, PQerrorMessage(c->conn));
		return;
	}
	query_sent(c, query_bytes("", nparams, params) + strlen(ps->name), owner);
}

void
remote_send_execute(RemoteConnection *c, const char *prepared_sql, int nparams, const char *arguments,
					const char *sql, bool in_transaction, const void *owner)
{
	PreparedStatement *ps;

	remote_flush_deferred(c);
	if (c->link == LINK_BUSY && c->owner != owner)
		park_pending(c);

	/*
	 * The Parse goes before the savepoints remote_send would add: only at
	 * the top level with no remote transaction yet, or in one as deep as
	 * ours, so that a Parse the node refuses or that is interrupted leaves
	 * nothing the abort of our (sub)transaction does not clean up.  Else,
	 * and on a link not idle or whose remote transaction failed or is
	 * prepared, sql goes, and remote_send says what is wrong if anything is.
	 */
	if (c->link != LINK_IDLE || strlen(prepared_sql) > REMOTE_PREPARED_TEXT_MAX ||
		!(in_transaction && c->xact == RXACT_NONE ? GetCurrentTransactionNestLevel() == 1
		  : remote_can_send_prepared(c, in_transaction)))
	{
		remote_send(c, sql, in_transaction, owner);
		return;
	}
	/*
	 * Prepared the second time the link sends the text, and only while the
	 * link has room: a text prepared this way never makes another statement
	 * go (a DEALLOCATE and a Parse again later, two round trips), so shapes
	 * taking turns cost at most the text they cost before.
	 */
	if (statement_cell(c, prepared_sql) == NULL && (!text_seen_before(c, prepared_sql) || list_length(c->statements) >= REMOTE_PREPARED_MAX))
	{
		remote_send(c, sql, in_transaction, owner);
		return;
	}
	ps = prepared_statement(c, prepared_sql, nparams);
	if (ps == NULL)
		return;					/* the link broke: the answer says so */
	/* the name is ours (ringshard_sN), the arguments literals */
	remote_send(c, psprintf("EXECUTE %s%s", ps->name, arguments), in_transaction, owner);
}

/* Flush what libpq holds for a nonblocking connection: 0 done, 1 more to send, -1 failed. */
static int
flush_some(RemoteConnection *c)
{
	int			rc = PQflush(c->conn);

	if (rc < 0)
		remote_mark_broken(c, PQerrorMessage(c->conn));
	return rc;
}

/*
 * What a finished query hands its caller: its result (or none), whether it
 * is no error, whether the link was lost, and how long it took since it was
 * sent.
 */
static void
set_outcome(RemoteConnection *c, RemoteResult *out, PGresult *result, bool ok, bool lost)
{
	out->result = result;
	out->ok = ok;
	out->lost = lost;
	out->pending = false;
	out->elapsed_ms = elapsed_ms(c->sent_at);
}

/* The query of a connection finished: hand its result over. */
static void
finish_query(RemoteConnection *c, RemoteResult *out)
{
	set_outcome(c, out, track_result(c->partial), c->partial != NULL && c->partial_ok, false);
	c->partial = NULL;
	c->partial_ok = false;
	c->owner = NULL;
	c->copying_in = false;
	remote_stats_round_trip(c->stats, out->elapsed_ms);
}

/* The connection failed while its query ran. */
static void
lose_query(RemoteConnection *c, RemoteResult *out, const char *why, RemoteFailureKind kind)
{
	if (kind != REMOTE_FAILURE_LINK_LOST)
		remote_stats_failure(c->stats, kind);
	if (c->link != LINK_BROKEN)
		remote_mark_broken(c, why);
	if (c->partial)
		PQclear(c->partial);
	c->partial = NULL;
	set_outcome(c, out, NULL, false, true);
}

void
remote_answer_counts_writes(RemoteConnection *c)
{
	c->answer_counts_writes = true;
}

void
remote_count_rows_written(RemoteConnection *c, int64 rows)
{
	if (ringshard_track_node_stats)
		remote_stats_received(c->stats, 0, rows, 0);
}

/*
 * A result's rows for stat_nodes: those it returns are read, those its
 * command tag says it inserted, updated, deleted or copied in are written
 * (the tag of a COPY that sent rows out counts them as read).
 */
static void
count_result(RemoteConnection *c, PGresult *r, ExecStatusType status)
{
	size_t		bytes = 0;
	int64		read = 0;
	int64		written = 0;

	/* a batch sent with the commit answers with its count: remote_deferred_outcome counts its rows */
	if (!ringshard_track_node_stats || c->ok_results + 1 == c->deferred_answer_at)
		return;
	if (status == PGRES_TUPLES_OK)
	{
		int			rows = PQntuples(r);
		int			cols = PQnfields(r);

		for (int i = 0; i < rows; i++)
			for (int j = 0; j < cols; j++)
				bytes += PQgetlength(r, i, j);
		/* an answer of counts is no rows read: its reader counts the rows written once it has checked it */
		if (!c->answer_counts_writes)
			read = rows;
	}
	else
	{
		const char *tag = PQcmdStatus(r);
		int64		rows = strtoll(PQcmdTuples(r), NULL, 10);

		if (strncmp(tag, "COPY", 4) == 0)
		{
			if (c->copying_in)
				written = rows;
			else
				read = rows;
		}
		else if (strncmp(tag, "INSERT", 6) == 0 || strncmp(tag, "UPDATE", 6) == 0 ||
				 strncmp(tag, "DELETE", 6) == 0 || strncmp(tag, "MERGE", 5) == 0)
			written = rows;
	}
	remote_stats_received(c->stats, read, written, bytes);
}

/*
 * Take what has arrived on a connection without waiting: true if its query
 * finished (out is filled), false if more is to come.
 */
static bool
absorb_input(RemoteConnection *c, RemoteResult *out)
{
	if (flush_some(c) < 0 || !PQconsumeInput(c->conn))
	{
		lose_query(c, out, PQerrorMessage(c->conn), REMOTE_FAILURE_LINK_LOST);
		return true;
	}
	while (!PQisBusy(c->conn))
	{
		PGresult   *r = PQgetResult(c->conn);
		ExecStatusType status;

		if (r == NULL)
		{
			c->link = LINK_IDLE;
			finish_query(c, out);
			return true;
		}
		status = PQresultStatus(r);
		if (status == PGRES_COPY_IN)
		{
			if (c->partial)
				PQclear(c->partial);
			c->partial = r;
			c->partial_ok = true;
			c->link = LINK_COPY_IN;
			finish_query(c, out);
			return true;
		}
		if (status == PGRES_COPY_OUT && c->copy_out_expected)
		{
			PQclear(r);
			c->copy_out_expected = false;
			c->link = LINK_COPY_OUT;
			c->partial_ok = true;
			set_outcome(c, out, NULL, true, false);
			c->owner = NULL;
			return true;
		}
		if (status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH || status == PGRES_SINGLE_TUPLE ||
			status == PGRES_PIPELINE_SYNC || status == PGRES_PIPELINE_ABORTED || status == PGRES_BAD_RESPONSE ||
			status == PGRES_EMPTY_QUERY)
		{
			/*
			 * No statement ringshard sends can answer so: the node is broken
			 * or not a PostgreSQL server we can trust.  The link goes (a
			 * COPY OUT would otherwise never end).
			 */
			char	   *why = psprintf("the node answered with an unexpected protocol state (%s)",
									   PQresStatus(status));

			PQclear(r);
			lose_query(c, out, why, REMOTE_FAILURE_MALFORMED);
			return true;
		}
		if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK)
		{
			if (c->stats)
				count_result(c, r, status);
			if (++c->ok_results == c->deferred_answer_at)
				strlcpy(c->deferred_answer, PQcmdStatus(r), sizeof(c->deferred_answer));
			/* keep the last result, unless an error came first */
			if (c->partial == NULL || c->partial_ok)
			{
				if (c->partial)
					PQclear(c->partial);
				c->partial = r;
				c->partial_ok = true;
			}
			else
				PQclear(r);
			continue;
		}
		/* an error: the rest of the string did not run */
		if (c->partial == NULL || c->partial_ok)
		{
			if (c->partial)
				PQclear(c->partial);
			c->partial = r;
			c->partial_ok = false;
			remote_stats_node_error(c->stats, PQresultErrorField(r, PG_DIAG_SQLSTATE));
			set_last_error(c, PQresultErrorMessage(r));
			if (PQresultErrorField(r, PG_DIAG_SQLSTATE))
			{
				const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);

				if (strlen(state) == 5)
					c->last_sqlstate = MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
			}
			if (c->xact == RXACT_OPEN)
				remote_set_xact(c, RXACT_FAILED);
		}
		else
			PQclear(r);
	}
	if (PQstatus(c->conn) == CONNECTION_BAD)
	{
		lose_query(c, out, PQerrorMessage(c->conn), REMOTE_FAILURE_LINK_LOST);
		return true;
	}
	return false;
}

int
remote_receive(RemoteConnection **conns, int n, RemoteResult *out, int need, int timeout_ms)
{
	return remote_receive_owned(conns, NULL, n, out, need, timeout_ms);
}

/* Take an owner's parked result, if there is one. */
static bool
take_parked(RemoteConnection *c, const void *owner, RemoteResult *out)
{
	ListCell   *lc;

	foreach(lc, c->parked)
	{
		ParkedResult *p = lfirst(lc);

		if (p->owner == owner)
		{
			out->result = track_result(p->result);
			out->ok = p->ok;
			c->parked = foreach_delete_current(c->parked, lc);
			pfree(p);
			return true;
		}
	}
	return false;
}

int
remote_receive_owned(RemoteConnection **conns, const void **owners, int n, RemoteResult *out,
					 int need, int timeout_ms)
{
	bool	   *done = palloc0(sizeof(bool) * Max(n, 1));
	PGconn	  **sockets = palloc0(sizeof(PGconn *) * Max(n, 1));
	uint32	   *events = palloc0(sizeof(uint32) * Max(n, 1));
	int			nfinished = 0;
	int			npending = 0;
	instr_time	start;

	INSTR_TIME_SET_CURRENT(start);
	for (int i = 0; i < n; i++)
	{
		RemoteConnection *c = conns[i];

		memset(&out[i], 0, sizeof(RemoteResult));
		if (owners && take_parked(c, owners[i], &out[i]))
		{
			/* drained earlier by another user of the connection */
			done[i] = true;
			nfinished++;
		}
		else if (c->link == LINK_BUSY && (owners == NULL || c->owner == owners[i]))
		{
			out[i].pending = true;
			npending++;
		}
		else
		{
			out[i].lost = c->link != LINK_COPY_IN && c->link != LINK_COPY_OUT;
			out[i].ok = !out[i].lost;
			done[i] = true;
			nfinished++;
		}
	}
	if (need <= 0 || need > n)
		need = n;

	while (npending > 0)
	{
		double		left = timeout_ms > 0 ? timeout_ms - elapsed_ms(start) : 1000;

		for (int i = 0; i < n; i++)
		{
			RemoteConnection *c = conns[i];

			events[i] = 0;
			sockets[i] = NULL;
			if (done[i])
				continue;
			if (absorb_input(c, &out[i]))
			{
				done[i] = true;
				npending--;
				nfinished++;
				continue;
			}
			if (timeout_ms > 0 && left <= 0)
			{
				(void) remote_cancel(c);
				lose_query(c, &out[i], psprintf("no answer within %d ms", timeout_ms), REMOTE_FAILURE_TIMEOUT);
				done[i] = true;
				npending--;
				nfinished++;
				continue;
			}
			sockets[i] = c->conn;
			events[i] = WL_SOCKET_READABLE | (PQisnonblocking(c->conn) && PQflush(c->conn) == 1 ? WL_SOCKET_WRITEABLE : 0);
		}
		if (npending == 0 || nfinished >= need || timeout_ms < 0)
			break;
		wait_sockets(sockets, events, n, (long) Max(1, Min(left, 1000)));
	}
	pfree(done);
	pfree(sockets);
	pfree(events);
	return nfinished;
}

void
remote_report_error(int elevel, RemoteConnection *c, PGresult *res, const char *sql)
{
	char	   *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	char	   *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char	   *detail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
	char	   *hint = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
	char	   *context = res ? PQresultErrorField(res, PG_DIAG_CONTEXT) : NULL;
	int			code = ERRCODE_CONNECTION_FAILURE;

	if (sqlstate && strlen(sqlstate) == 5)
		code = MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4]);
	if (primary == NULL)
		primary = c->last_error ? c->last_error : (c->conn ? PQerrorMessage(c->conn) : "connection lost");
	/* a node that lacks what ringshard sets up on it: say what sets it up */
	if (hint == NULL && code == ERRCODE_INVALID_SCHEMA_NAME && strstr(primary, "ringshard") != NULL)
		hint = psprintf("Run CREATE EXTENSION ringshard in node \"%s\"'s database, then SELECT * FROM "
						"ringshard.sync_topology(); on the coordinator.", c->node);
	else if (hint == NULL && code == ERRCODE_UNDEFINED_TABLE)
		hint = psprintf("Node \"%s\" lacks the table: if the node is new, CALL ringshard.rebalance(table) creates "
						"it there; else SELECT ringshard.push_table_definition(table).", c->node);
	ereport(elevel,
			(errcode(code),
			 errmsg_internal("node \"%s\": %s", c->node, primary),
			 detail ? errdetail_internal("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0,
			 context ? errcontext("%s", context) : 0,
			 sql ? errcontext("SQL sent to node \"%s\": %s", c->node, sql) : 0));
}

PGresult *
remote_answer(RemoteConnection *c, RemoteResult *out, const char *sql, const char *what)
{
	if (out->ok && out->result != NULL)
		return out->result;
	if (out->result && !out->lost)
		remote_report_error(ERROR, c, out->result, sql);
	remote_result_free(out->result);
	out->result = NULL;
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 what ? errmsg("lost the connection to node \"%s\" during %s", c->node, what)
			 : errmsg("lost the connection to node \"%s\"", c->node),
			 c->last_error ? errdetail_internal("%s", c->last_error) : 0));
	return NULL;				/* keep the compiler quiet */
}

/* A node answered what no statement of ours can get: the link goes, and it is an error. */
void
remote_reject_answer(RemoteConnection *c, const char *what, const char *detail)
{
	char	   *why = psprintf("the node's answer to %s was malformed: %s", what, detail);

	remote_stats_failure(c->stats, REMOTE_FAILURE_MALFORMED);
	remote_mark_broken(c, why);
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("node \"%s\" answered %s with a malformed result", c->node, what),
			 errdetail_internal("%s", detail),
			 errhint("The connection to the node was closed. Check that the address is that of a "
					 "PostgreSQL server with ringshard installed.")));
}

void
remote_expect_rows(RemoteConnection *c, PGresult *res, int nfields, int min_rows, int max_rows,
				   const char *what)
{
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		remote_reject_answer(c, what, psprintf("%s where rows were expected", PQresStatus(PQresultStatus(res))));
	if (PQnfields(res) != nfields)
		remote_reject_answer(c, what, psprintf("%d columns where %d were expected", PQnfields(res), nfields));
	if (PQntuples(res) < min_rows || (max_rows >= 0 && PQntuples(res) > max_rows))
		remote_reject_answer(c, what, max_rows == min_rows
					  ? psprintf("%d rows where %d were expected", PQntuples(res), min_rows)
					  : psprintf("%d rows where %d to %d were expected", PQntuples(res), min_rows, max_rows));
	for (int i = 0; i < nfields; i++)
		if (PQfformat(res, i) != 0 && PQfformat(res, i) != 1)
			remote_reject_answer(c, what, psprintf("column %d has format %d", i + 1, PQfformat(res, i)));
}

/* Whether a command tag is `tag` (alone or followed by its counts). */
static bool
tag_is(const char *status, const char *tag)
{
	size_t		len = strlen(tag);

	return strncmp(status, tag, len) == 0 && (status[len] == '\0' || status[len] == ' ');
}

/* Whether a command tag's row count (its last number) is `rows`. */
static bool
tag_counts(const char *status, int64 rows)
{
	const char *count = strrchr(status, ' ');
	char	   *end;
	long long	value;

	if (count == NULL || count[1] == '\0')
		return false;
	errno = 0;
	value = strtoll(count + 1, &end, 10);
	return errno == 0 && *end == '\0' && value == rows;
}

void
remote_expect_command(RemoteConnection *c, PGresult *res, const char *tag, int64 rows, const char *what)
{
	const char *status;

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		remote_reject_answer(c, what, psprintf("%s where a command's completion was expected", PQresStatus(PQresultStatus(res))));
	status = PQcmdStatus(res);
	if (tag && !tag_is(status, tag))
		remote_reject_answer(c, what, psprintf("\"%s\" where \"%s\" was expected", pnstrdup(status, 60), tag));
	if (rows >= 0 && !tag_counts(status, rows))
		remote_reject_answer(c, what, psprintf("\"%s\" where " INT64_FORMAT " rows were expected",
										pnstrdup(status, 60), rows));
}

/* ----- Writes that travel with the commit (connection.h) ----- */

static void hold_write(RemoteConnection *c, const char *sql, int64 rows, const char *what);

/* Ready to hold a write back: nothing else held or in flight, and its transaction sound. */
static void
prepare_to_defer(RemoteConnection *c)
{
	remote_flush_deferred(c);	/* one held back at a time: an earlier one goes now */
	require_idle_link(c);
	if (c->xact == RXACT_FAILED || c->xact == RXACT_PREPARED)
		ereport(ERROR,
				(errcode(ERRCODE_IN_FAILED_SQL_TRANSACTION),
				 errmsg("the remote transaction on node \"%s\" failed earlier in this transaction", c->node),
				 c->last_error ? errdetail_internal("%s", c->last_error) : 0));
	Assert(GetCurrentTransactionNestLevel() == 1);
}

void
remote_defer_write(RemoteConnection *c, const char *sql, int64 rows, const char *what)
{
	prepare_to_defer(c);
	hold_write(c, sql, rows, what);
}

void
remote_defer_prepared_write(RemoteConnection *c, const char *sql, int nparams, const char *arguments,
							int64 rows, const char *what)
{
	PreparedStatement *ps;

	prepare_to_defer(c);
	ps = prepared_statement(c, sql, nparams);
	if (ps == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost the connection to node \"%s\" during %s", c->node, what),
				 c->last_error ? errdetail_internal("%s", c->last_error) : 0));
	/* the name is ours (ringshard_sN), the arguments a row of literals */
	hold_write(c, psprintf("EXECUTE %s%s", ps->name, arguments), rows, what);
}

/* Hold the text of a write on an idle link with a sound transaction (prepare_to_defer). */
static void
hold_write(RemoteConnection *c, const char *sql, int64 rows, const char *what)
{
	MemoryContext old;
	StringInfoData buf;

	old = MemoryContextSwitchTo(TopTransactionContext);
	initStringInfo(&buf);
	c->deferred_opens = c->xact == RXACT_NONE;
	if (c->deferred_opens)
		open_transaction_text(c, &buf);
	appendStringInfoString(&buf, sql);
	c->deferred = buf.data;
	c->deferred_rows = rows;
	c->deferred_what = pstrdup(what);
	MemoryContextSwitchTo(old);
}

void
remote_flush_deferred(RemoteConnection *c)
{
	char	   *sql = c->deferred;
	RemoteResult out;
	PGresult   *res;

	if (sql == NULL)
		return;
	c->deferred = NULL;
	remote_send(c, sql, false, c);
	/* which result answers the batch (its count is not rows read, for stat_nodes) */
	c->deferred_answer_at = c->deferred_opens ? 2 : 1;
	c->deferred_opens = false;
	remote_receive_all(&c, 1, &out, 0);
	c->deferred_answer_at = 0;
	res = remote_answer(c, &out, NULL, c->deferred_what);
	/* the node checked the count itself (rsfdw_insert_values_checked_sql): one row, the count */
	remote_expect_rows(c, res, 1, 1, 1, c->deferred_what);
	if (remote_int64_value(c, res, 0, 0, c->deferred_what) != c->deferred_rows)
		remote_reject_answer(c, c->deferred_what, psprintf("a count of %s where " INT64_FORMAT " was expected",
													 pnstrdup(PQgetvalue(res, 0, 0), 24), c->deferred_rows));
	remote_stats_received(c->stats, 0, c->deferred_rows, 0);
	remote_result_free(res);
}

char *
remote_take_deferred(RemoteConnection *c, const char *command)
{
	char	   *sql = psprintf("%s;%s", c->deferred, command);

	c->deferred_answer_at = c->deferred_opens ? 2 : 1;
	c->deferred_answer[0] = '\0';
	c->deferred = NULL;
	c->deferred_opens = false;
	return sql;
}

void
remote_drop_deferred(RemoteConnection *c)
{
	/* never sent: a transaction it would have opened does not exist on the node */
	if (c->deferred && c->deferred_opens)
	{
		remote_set_xact(c, RXACT_NONE);
		c->xact_depth = 0;
	}
	c->deferred = NULL;
	c->deferred_opens = false;
	c->deferred_answer_at = 0;
	c->deferred_failure = NULL;
}

bool
remote_deferred_outcome(RemoteConnection *c, PGresult *res, bool ok, bool *keep_result)
{
	int			at = c->deferred_answer_at;

	*keep_result = false;
	c->deferred_answer_at = 0;
	if (at == 0)
		return true;
	if (c->ok_results < at)
	{
		/* the write (or the START before it) failed, so the rest of the string did not run */
		c->deferred_failure = NULL;
		if (!ok && res != NULL)
		{
			c->deferred_failure = res;
			*keep_result = true;
		}
		else if (ok)
			snprintf(c->deferred_answer, sizeof(c->deferred_answer),
					 "%d results where %d were expected", c->ok_results, at + 1);
		else
			return true;		/* the link was lost: the commit says so */
		return false;
	}
	/* the node checked the count itself: its statement answers with one row */
	if (!tag_is(c->deferred_answer, "SELECT") || !tag_counts(c->deferred_answer, 1))
	{
		char	   *tag = pstrdup(c->deferred_answer);

		c->deferred_failure = NULL;
		snprintf(c->deferred_answer, sizeof(c->deferred_answer), "\"%.24s\" where SELECT 1 was expected", tag);
		return false;
	}
	remote_stats_received(c->stats, 0, c->deferred_rows, 0);
	return true;
}

void
remote_raise_deferred_failure(RemoteConnection *c)
{
	if (c->deferred_failure)
		remote_report_error(ERROR, c, c->deferred_failure, NULL);

	/*
	 * A wrong answer, but every result of the string was read: the link
	 * stays, so the abort can still roll back (or ROLLBACK PREPARED) the
	 * node's part instead of leaving it to recovery.
	 */
	set_last_error(c, c->deferred_answer);
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("node \"%s\" answered %s with a malformed result", c->node,
					c->deferred_what ? c->deferred_what : "a write"),
			 errdetail_internal("%s", c->deferred_answer),
			 errhint("Check that the address is that of a PostgreSQL server with ringshard installed.")));
}

void
remote_expect_formats(RemoteConnection *c, PGresult *res, int format, const Oid *types, const char *what)
{
	for (int i = 0; i < PQnfields(res); i++)
	{
		if (PQfformat(res, i) != format)
			remote_reject_answer(c, what, psprintf("column %d is in %s format, not %s", i + 1,
											PQfformat(res, i) ? "binary" : "text", format ? "binary" : "text"));
		/* a built-in type has the same OID on every server: a binary value must be of it */
		if (types && OidIsValid(types[i]) && types[i] < FirstGenbkiObjectId && PQftype(res, i) != types[i])
			remote_reject_answer(c, what, psprintf("column %d is of type %u where %u was expected", i + 1,
											PQftype(res, i), types[i]));
	}
}

char *
remote_text_value(RemoteConnection *c, PGresult *res, int row, int column, const char *what)
{
	if (row >= PQntuples(res) || column >= PQnfields(res) || PQfformat(res, column) != 0)
		remote_reject_answer(c, what, psprintf("no text value in row %d, column %d", row + 1, column + 1));
	if (PQgetisnull(res, row, column))
		remote_reject_answer(c, what, psprintf("a null value in row %d, column %d", row + 1, column + 1));
	return PQgetvalue(res, row, column);
}

int64
remote_int64_value(RemoteConnection *c, PGresult *res, int row, int column, const char *what)
{
	char	   *text = remote_text_value(c, res, row, column, what);
	char	   *end;
	long long	value;

	errno = 0;
	value = strtoll(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0')
		remote_reject_answer(c, what, psprintf("\"%s\" in row %d, column %d is not an integer",
										pnstrdup(text, 40), row + 1, column + 1));
	return (int64) value;
}

PGresult *
remote_exec(RemoteConnection *c, const char *sql, bool in_transaction)
{
	return remote_exec_timed(c, sql, in_transaction, 0);
}

PGresult *
remote_exec_timed(RemoteConnection *c, const char *sql, bool in_transaction, int timeout_ms)
{
	RemoteResult out;

	remote_send(c, sql, in_transaction, c);
	remote_receive_all(&c, 1, &out, timeout_ms);
	return remote_answer(c, &out, sql, NULL);
}

void
remote_copy_data(RemoteConnection *c, const char *data, int len)
{
	int			rc;

	if (c->link != LINK_COPY_IN)
		elog(ERROR, "ringshard: node \"%s\" is not receiving COPY data", c->node);
	remote_stats_bytes_sent(c->stats, len);
	while ((rc = PQputCopyData(c->conn, data, len)) == 0)
	{
		/* libpq's buffer is full: wait until the node takes some */
		PGconn	   *sock = c->conn;
		uint32		ev = WL_SOCKET_WRITEABLE;

		wait_sockets(&sock, &ev, 1, 1000);
		if (flush_some(c) < 0)
			break;
	}
	if (rc < 0 || c->link == LINK_BROKEN)
	{
		if (c->link != LINK_BROKEN)
			remote_mark_broken(c, PQerrorMessage(c->conn));
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost the connection to node \"%s\" while sending rows", c->node),
				 errdetail_internal("%s", c->last_error)));
	}
}

void
remote_copy_end_all(RemoteConnection **conns, int n)
{
	for (int i = 0; i < n; i++)
	{
		RemoteConnection *c = conns[i];

		if (c->link != LINK_COPY_IN)
			continue;
		if (PQputCopyEnd(c->conn, NULL) < 0)
		{
			remote_mark_broken(c, PQerrorMessage(c->conn));
			continue;
		}
		c->link = LINK_BUSY;
		c->copying_in = true;
		INSTR_TIME_SET_CURRENT(c->sent_at);
		/* remote_receive_all flushes the rest while it waits */
	}
}

void
remote_take_moving_rows(RemoteConnection *c)
{
	PGresult   *res;

	if (c->takes_moving_rows)
		return;
	res = remote_exec(c, "SET LOCAL ringshard.accept_moving_rows = on", true);
	remote_expect_command(c, res, "SET", -1, "a write of rows that move");
	remote_result_free(res);
	c->takes_moving_rows = true;
}

/*
 * The end of a COPY at one of its two ends: the command's result, which
 * must be a command's end, and the rows that end counted.
 */
static int64
copy_end_rows(RemoteConnection *c, const char *sql)
{
	RemoteResult out;
	PGresult   *res;
	int64		rows;

	remote_receive_all(&c, 1, &out, 0);
	res = remote_answer(c, &out, sql, "a copy of rows");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		remote_reject_answer(c, "a copy of rows", psprintf("%s where a command's end was expected",
													PQresStatus(PQresultStatus(res))));
	rows = strtoll(PQcmdTuples(res), NULL, 10);
	remote_result_free(res);
	return rows;
}

int64
remote_copy_between(RemoteConnection *from, RemoteConnection *to, const char *out_sql, const char *in_sql)
{
	return remote_copy_between_reporting(from, to, out_sql, in_sql, NULL, NULL);
}

int64
remote_copy_between_reporting(RemoteConnection *from, RemoteConnection *to, const char *out_sql, const char *in_sql,
							  void (*relayed) (int64 rows, void *arg), void *arg)
{
	RemoteResult out;
	int64		rows;
	int64		sent;
	int64		messages = 0;

	/* the target first: ready for data before any comes */
	to->wrote = true;			/* a write of this transaction: it commits in two phases */
	remote_send(to, in_sql, true, to);
	remote_receive_all(&to, 1, &out, 0);
	if (!out.ok || to->link != LINK_COPY_IN)
	{
		out.ok = false;
		(void) remote_answer(to, &out, in_sql, "a copy of rows");
	}
	remote_result_free(out.result);

	from->copy_out_expected = true;
	remote_send(from, out_sql, true, from);
	remote_receive_all(&from, 1, &out, 0);
	from->copy_out_expected = false;
	if (!out.ok || from->link != LINK_COPY_OUT)
	{
		out.ok = false;
		(void) remote_answer(from, &out, out_sql, "a copy of rows");
	}

	for (;;)
	{
		char	   *data = NULL;
		int			n;

		/* a source that never stops sending is stopped by a cancel, as one that is silent */
		CHECK_FOR_INTERRUPTS();
		n = PQgetCopyData(from->conn, &data, 1);
		if (n > 0)
		{
			remote_stats_received(from->stats, 0, 0, n);
			PG_TRY();
			{
				remote_copy_data(to, data, n);
			}
			PG_FINALLY();
			{
				PQfreemem(data);
			}
			PG_END_TRY();
			/* a COPY sends a row per message (binary: the header with the first, the trailer in its own) */
			if (relayed && (++messages % 256) == 0)
				relayed(messages, arg);
			continue;
		}
		if (n == 0)
		{
			PGconn	   *sock = from->conn;
			uint32		event = WL_SOCKET_READABLE;

			wait_sockets(&sock, &event, 1, 1000);
			if (!PQconsumeInput(from->conn))
			{
				remote_mark_broken(from, PQerrorMessage(from->conn));
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("lost the connection to node \"%s\" while copying rows from it", from->node),
						 errdetail_internal("%s", from->last_error)));
			}
			continue;
		}
		break;					/* -1: the COPY ended; -2: it failed, its result says why */
	}

	/* the source's COPY result, then its end of the query */
	from->link = LINK_BUSY;
	from->owner = from;
	sent = copy_end_rows(from, out_sql);

	remote_copy_end_all(&to, 1);
	to->owner = to;
	rows = copy_end_rows(to, in_sql);
	/* both ends count the rows: a relay that lost or gained one is no copy */
	if (rows != sent)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a copy of rows from node \"%s\" to node \"%s\" sent " INT64_FORMAT " rows and stored " INT64_FORMAT,
						from->node, to->node, sent, rows)));
	return rows;
}

/*
 * The head of libpq's PGcancel (struct pg_cancel of libpq-int.h, the same in
 * libpq 13 to 17): the server's address, the backend's pid and its key.
 * PQcancel() waits for the server to close the connection with no time
 * limit and retries on EINTR, so a node that accepts a cancel request and
 * never answers would hold a backend for ever, deaf to its own cancel and
 * terminate.  The request is sent here instead, without blocking, within a
 * bounded time.
 */
typedef struct LibpqCancelHead
{
	SockAddr	raddr;
	int			be_pid;
	int			be_key;
} LibpqCancelHead;

/* Wait for a socket event within the deadline; false when the time is up. */
static bool
wait_socket_until(pgsocket sock, uint32 event, instr_time start, int limit_ms)
{
	for (;;)
	{
		double		left = limit_ms - elapsed_ms(start);
		int			rc;

		if (left <= 0)
			return false;
		rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | event, sock,
							   (long) Max(1, Min(left, 1000)), PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (rc & event)
			return true;
	}
}

/* Send a cancel request for the query running on a connection, within limit_ms; whether it was delivered. */
static bool
send_cancel_request(PGconn *conn, int limit_ms)
{
	PGcancel   *cancel;
	LibpqCancelHead head;
	pgsocket	sock;
	instr_time	start;
	bool		delivered = false;
	struct
	{
		uint32		length;
		CancelRequestPacket packet;
	}			request;

	if (PQlibVersion() >= 180000)
	{
		/* a libpq whose cancel keys are not laid out as above: its own, blocking call */
		char		errbuf[256];

		cancel = PQgetCancel(conn);
		if (cancel == NULL)
			return false;
		delivered = PQcancel(cancel, errbuf, sizeof(errbuf)) == 1;
		PQfreeCancel(cancel);
		return delivered;
	}
	cancel = PQgetCancel(conn);
	if (cancel == NULL)
		return false;
	memcpy(&head, cancel, sizeof(head));
	PQfreeCancel(cancel);

	INSTR_TIME_SET_CURRENT(start);
	sock = socket(head.raddr.addr.ss_family, SOCK_STREAM, 0);
	if (sock == PGINVALID_SOCKET)
		return false;
	if (!pg_set_noblock(sock))
	{
		closesocket(sock);
		return false;
	}
	request.length = pg_hton32((uint32) sizeof(request));
	request.packet.cancelRequestCode = (MsgType) pg_hton32(CANCEL_REQUEST_CODE);
	request.packet.backendPID = pg_hton32((uint32) head.be_pid);
	request.packet.cancelAuthCode = pg_hton32((uint32) head.be_key);

	PG_TRY();
	{
		bool		connected = connect(sock, (struct sockaddr *) &head.raddr.addr, head.raddr.salen) == 0;

		if (!connected && errno == EINPROGRESS &&
			wait_socket_until(sock, WL_SOCKET_WRITEABLE, start, limit_ms))
		{
			int			error = 0;
			socklen_t	len = sizeof(error);

			connected = getsockopt(sock, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
		}
		if (connected && send(sock, &request, sizeof(request), 0) == (ssize_t) sizeof(request))
		{
			/* the server closes the connection once it has the request */
			char		byte;

			delivered = true;
			while (wait_socket_until(sock, WL_SOCKET_READABLE, start, limit_ms))
			{
				ssize_t		n = recv(sock, &byte, 1, 0);

				if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
					break;
			}
		}
	}
	PG_FINALLY();
	{
		closesocket(sock);
	}
	PG_END_TRY();
	return delivered;
}

bool
remote_abandon_query(RemoteConnection *c)
{
	/* a COPY OUT cannot be stopped but by reading it to its end: the link goes instead */
	if (c->link == LINK_COPY_OUT)
		remote_mark_broken(c, "a COPY from the node was left unfinished");
	if (c->link == LINK_BUSY || c->link == LINK_COPY_IN)
	{
		RemoteResult out;

		(void) remote_cancel(c);
		if (c->link == LINK_COPY_IN)
			c->link = LINK_BUSY;	/* PQputCopyEnd ended the data: the result follows */
		remote_receive_all(&c, 1, &out, Min(ringshard_node_timeout_ms, 2000));
		remote_result_free(out.result);
		if (c->link == LINK_BUSY)
			remote_mark_broken(c, "the node did not stop the query it was running");
	}
	return c->link == LINK_IDLE;
}

bool
remote_cancel(RemoteConnection *c)
{
	if (c->conn == NULL)
		return false;
	if (c->link == LINK_COPY_IN)
		(void) PQputCopyEnd(c->conn, "canceled by the coordinator");
	return send_cancel_request(c->conn, Min(ringshard_node_timeout_ms, 2000));
}
