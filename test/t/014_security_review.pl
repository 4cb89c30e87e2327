# The attacks of the 1.1 security review, each tried against the fix, on
# separate servers (coordinator and two workers; peer for the server's own
# account, scram-sha-256 for ordinary roles).  Each fails on the code before
# the fix:
#  1. ringshard_admin -> superuser through an operator of its own on the
#     search_path while the extension writes its catalog as its owner;
#  2. a role that pre-creates a distributed table's name on a worker, with a
#     trigger, gets the rights of everyone who writes through the coordinator;
#  3. SQL injected into DDL sent to the nodes through a type name or a
#     column default;
#  4. statements the nodes run (node_ddl, a rebalance step's condition)
#     written by an administrator and run by a superuser;
#  5. a foreign server of another role dropped by the extension's event
#     trigger through a forged node row;
#  6. reads_here() on a worker crashing it with a key of the wrong type, or
#     reading a table without SELECT;
#  7. an administrator moving a node's address to collect other roles'
#     passwords;
#  8. one role's failing mapping holding back every other role's queued
#     writes for ever;
#  9. a forged prepared transaction stalling recovery; the coordinator's id
#     readable by everyone.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("v$_") } 1 .. 2;
my $os_user = getpwuid($<);
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	open(my $hba, '>', $node->data_dir . '/pg_hba.conf') or die;
	print $hba "local all $os_user peer\n";
	print $hba "local all all scram-sha-256\n";
	close($hba);
	$node->start;
	$node->safe_psql('postgres', q{
		SET password_encryption = 'scram-sha-256';
		CREATE EXTENSION ringshard;
		CREATE ROLE radmin LOGIN PASSWORD 'radmin-pw' IN ROLE ringshard_admin;
		CREATE ROLE alice LOGIN PASSWORD 'alice-pw';
		CREATE ROLE bob LOGIN PASSWORD 'bob-pw';
		GRANT CREATE ON SCHEMA public TO radmin, bob;
		GRANT CREATE ON DATABASE postgres TO radmin, bob;
	});
}

# Run SQL on a server as one of the password roles; returns (rc, out, err).
sub as_role
{
	my ($node, $role, $sql) = @_;
	local $ENV{PGPASSWORD} = "$role-pw";
	return $node->psql('postgres', $sql, extra_params => [ '-U', $role ]);
}

sub is_superuser
{
	my ($node, $role) = @_;
	return $node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = '$role'");
}

my $setup = '';
for my $i (1 .. 2)
{
	my $w = $workers[ $i - 1 ];
	$setup .= sprintf("SELECT ringshard.add_node('v%d', 'host=%s port=%d dbname=postgres');", $i, $w->host, $w->port);
}
$setup .= q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
};
for my $role (qw(radmin alice bob))
{
	$setup .= "CREATE USER MAPPING FOR $role SERVER v$_ OPTIONS (user '$role', password '$role-pw');" for 1 .. 2;
}
$coordinator->safe_psql('postgres', $setup);

#
# 1. An administrator's operator on the search_path while the extension
#    writes its catalog as the catalog's owner (a superuser).
#
my ($rc, $out, $err) = as_role($coordinator, 'radmin', q{
	CREATE SCHEMA evil;
	CREATE FUNCTION evil.oideq(oid, oid) RETURNS bool LANGUAGE plpgsql AS $$
	BEGIN
		IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
			EXECUTE 'ALTER ROLE radmin SUPERUSER';
		END IF;
		RETURN $1 OPERATOR(pg_catalog.=) $2;
	END $$;
	CREATE OPERATOR evil.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = evil.oideq);
	CREATE TABLE public.t1 (id int PRIMARY KEY, v text);
	SELECT ringshard.distribute_table('public.t1', 'id');
	SET search_path = evil, pg_catalog;
	SELECT ringshard.create_distributed_table('public.t1');
});
is($rc, 0, '1. an administrator distributes a table with an operator of its own first on the search_path')
  or diag($err);
is(is_superuser($coordinator, 'radmin'), 'f', '1. and does not become superuser (the catalog is written on a pinned search_path)');

#
# 2. A table of another role, with a trigger, waiting on a worker under the
#    name of a table about to be distributed.
#
for my $w (@workers)
{
	($rc, $out, $err) = as_role($w, 'bob', q{
		CREATE TABLE public.orders (id int PRIMARY KEY, item text);
		GRANT ALL ON public.orders TO PUBLIC;
		CREATE FUNCTION public.bob_trap() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
				EXECUTE 'ALTER ROLE bob SUPERUSER';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER trap BEFORE INSERT ON public.orders FOR EACH ROW EXECUTE FUNCTION public.bob_trap();
	});
	is($rc, 0, '2. bob prepares his trap on ' . $w->name) or diag($err);
}
($rc, $out, $err) = as_role($coordinator, 'radmin', q{
	CREATE TABLE public.orders (id int PRIMARY KEY, item text);
	INSERT INTO public.orders VALUES (1, 'first');
	SELECT ringshard.distribute_table('public.orders', 'id');
	SELECT ringshard.create_distributed_table('public.orders');
});
like($err, qr/table public\.orders exists on this node and is not a table of role radmin/,
	'2. a worker does not adopt a table another role created there');
is($coordinator->safe_psql('postgres', q{SELECT relkind FROM pg_class WHERE oid = 'public.orders'::regclass}), 'r',
	'2. nothing changed on the coordinator');
# radmin's own table with a trigger of its own is refused too
for my $w (@workers)
{
	as_role($w, 'radmin', q{
		CREATE TABLE public.own (id int PRIMARY KEY);
		CREATE FUNCTION public.own_trigger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
		CREATE TRIGGER t BEFORE INSERT ON public.own FOR EACH ROW EXECUTE FUNCTION public.own_trigger();
	});
}
($rc, $out, $err) = as_role($coordinator, 'radmin', q{
	CREATE TABLE public.own (id int PRIMARY KEY);
	SELECT ringshard.distribute_table('public.own', 'id');
	SELECT ringshard.create_distributed_table('public.own');
});
like($err, qr/table public\.own exists on this node with triggers, rules or policies of its own/,
	'2. nor a table with triggers that would run for every write');
$coordinator->safe_psql('postgres', q{INSERT INTO public.orders VALUES (2, 'superuser row')});
is(is_superuser($_, 'bob'), 'f', '2. bob did not become superuser on ' . $_->name) for @workers;

#
# 3. SQL injected into DDL sent to the nodes.
#
for my $node ($coordinator, @workers)
{
	as_role($node, 'bob', q{
		CREATE SCHEMA bobs;
		GRANT USAGE ON SCHEMA bobs TO PUBLIC;
		CREATE TYPE bobs.mood AS ENUM ('ok', 'sad');
	});
}
($rc, $out, $err) = as_role($coordinator, 'radmin', q{
	CREATE TABLE public.ut (id int PRIMARY KEY, m bobs.mood, c1 text);
	SELECT ringshard.distribute_table('public.ut', 'id');
	SELECT ringshard.create_distributed_table('public.ut');
});
is($rc, 0, '3. a table with a column of bob\'s type is distributed') or diag($err);
# bob renames his type on the coordinator so that its name reads as SQL
($rc, $out, $err) = as_role($coordinator, 'bob',
	q{ALTER TYPE bobs.mood RENAME TO "x, c1 DEFAULT 1; CREATE TABLE public.injected(w) AS SELECT current_user;--"});
is($rc, 0, '3. bob renames his type') or diag($err);
($rc, $out, $err) = $coordinator->psql('postgres', q{ALTER TABLE public.ut ALTER COLUMN c1 SET DEFAULT 'hello'});
is($rc, 0, '3. a superuser sets a default on the table') or diag($err);
is(join(',', map { $_->safe_psql('postgres', q{SELECT to_regclass('public.injected') IS NULL}) } @workers), 't,t',
	'3. a superuser\'s ALTER COLUMN SET DEFAULT runs nothing hidden in a type name on the nodes');
is(join(',', map { scalar $_->psql('postgres', q{SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'public.ut'::regclass}) == 0 ? $_->safe_psql('postgres', q{SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'public.ut'::regclass}) : '?' } @workers),
	q{'hello'::text,'hello'::text}, '3. the default reached the nodes as it is');
# an administrator's default holding what looks like the next column
($rc, $out, $err) = as_role($coordinator, 'radmin',
	q{ALTER TABLE public.ut ALTER COLUMN c1 SET DEFAULT 'zz, c3 int; CREATE TABLE public.pwned AS SELECT current_user AS who; --'});
is($rc, 0, '3. radmin sets a default that reads as SQL') or diag($err);
($rc, $out, $err) = $coordinator->psql('postgres', q{ALTER TABLE public.ut ADD COLUMN c3 int});
is($rc, 0, '3. a superuser adds a column') or diag($err);
is(join(',', map { $_->safe_psql('postgres', q{SELECT to_regclass('public.pwned') IS NULL}) } @workers), 't,t',
	'3. a superuser\'s ADD COLUMN runs nothing hidden in another column\'s default on the nodes');
is(join(',', map { $_->safe_psql('postgres', q{SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'public.ut'::regclass AND attname = 'c3'}) } @workers),
	'integer,integer', '3. the column was added on the nodes');

#
# 4. Statements nodes run, written by an administrator, run by a superuser.
#
($rc, $out, $err) = as_role($coordinator, 'radmin', q{
	UPDATE ringshard.distributed_tables SET node_ddl = node_ddl || '[{"name": "x", "sql": "ALTER ROLE radmin SUPERUSER"}]'
	 WHERE table_name = 'public.t1'::regclass});
like($err, qr/permission denied for table distributed_tables/, '4. an administrator cannot write the statements nodes run for a table');
# (the second condition has a step's shape at both ends, and more between)
for my $forged (q{'true) OR (SELECT true FROM pg_catalog.set_config(''x.y'', ''z'', false)'},
	q{'(pg_catalog.ring_token(t.id) > ''1''::pg_catalog.ringtoken AND pg_catalog.ring_token(t.id) <= ''2''::pg_catalog.ringtoken) OR (SELECT true FROM pg_catalog.set_config(''x.y'', ''z'', false)) OR (pg_catalog.ring_token(t.id) <= ''3''::pg_catalog.ringtoken)'})
{
	($rc, $out, $err) = as_role($coordinator, 'radmin', qq{
		INSERT INTO ringshard.rebalance_progress (table_name, step, predicate, source, targets, deletes, fraction)
		VALUES ('public.t1', 1, $forged, 'v1', '{v2}', '{}', 0.5)});
	is($rc, 0, '4. an administrator may record a rebalance step (it reads and clears them)') or diag($err);
	($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('public.t1')});
	like($err, qr/a recorded rebalance step of public\.t1 was not made by ringshard/,
		'4. a superuser\'s rebalance refuses a step condition it did not build, before any node runs it');
	$coordinator->safe_psql('postgres', q{DELETE FROM ringshard.rebalance_progress});
}

#
# 5. The extension's event trigger dropping another role's server.
#
$coordinator->safe_psql('postgres', q{
	CREATE FOREIGN DATA WRAPPER dummy;
	GRANT USAGE ON FOREIGN DATA WRAPPER dummy TO bob;
});
as_role($coordinator, 'bob', q{CREATE SERVER bobsrv FOREIGN DATA WRAPPER dummy});
($rc, $out, $err) = as_role($coordinator, 'radmin', q{
	INSERT INTO ringshard.nodes (node_name, server_name) VALUES ('ghost', 'bobsrv');
	CREATE TABLE public.decoy (id int);
	SELECT ringshard.distribute_table('public.decoy', 'id');
	DROP TABLE public.decoy;
});
is($rc, 0, '5. radmin drops an annotated table after forging a node row') or diag($err);
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM pg_foreign_server WHERE srvname = 'bobsrv'}), '1',
	'5. bob\'s server, not ringshard\'s, is left alone');

#
# 6. reads_here() on a worker, called by anyone.
#
$coordinator->safe_psql('postgres', q{
	CREATE TABLE public.kt (k text PRIMARY KEY);
	SELECT ringshard.distribute_table('public.kt', 'k');
	SELECT ringshard.create_distributed_table('public.kt');
});
($rc, $out, $err) = as_role($workers[0], 'alice', q{SELECT ringshard_worker.reads_here('public.kt'::regclass, 'a'::text, '{}', NULL)});
like($err, qr/permission denied for table kt/, '6. reads_here needs SELECT on the table');
$workers[0]->safe_psql('postgres', q{GRANT SELECT ON public.kt TO alice});
($rc, $out, $err) = as_role($workers[0], 'alice', q{SELECT ringshard_worker.reads_here('public.kt'::regclass, 1::int4, '{}', NULL)});
like($err, qr/reads_here\(\) needs the key of table kt as the table's column type/, '6. a key of another type is an error');
is($workers[0]->safe_psql('postgres', q{SELECT 1}), '1', '6. and the worker is still up');
like($workers[0]->safe_psql('postgres', q{SELECT ringshard_worker.reads_here('public.kt'::regclass, 'a'::text, '{}', NULL)}),
	qr/^[tf]$/, '6. the key of the right type answers');

#
# 7. An administrator moving a node's address while other roles have
#    mappings for it (their passwords would go there).
#
my $v2 = sprintf('host=%s port=%d dbname=postgres', $workers[1]->host, $workers[1]->port);
($rc, $out, $err) = as_role($coordinator, 'radmin', qq{SELECT ringshard.set_node_address('v2', '$v2 connect_timeout=3')});
like($err, qr/only a superuser may change node server "v2" while other roles have user mappings for it/,
	'7. an administrator may not move a node that other roles have mappings for');
($rc, $out, $err) = as_role($coordinator, 'radmin', q{ALTER SERVER v2 OPTIONS (SET port '23999')});
like($err, qr/only a superuser may set or keep option "ambient_credentials" of a ringshard node/,
	'7. nor by ALTER SERVER of an address a superuser gave');
($rc, $out, $err) = as_role($coordinator, 'radmin', q{ALTER SERVER v2 OPTIONS (DROP ambient_credentials, SET port '23999')});
like($err, qr/only a superuser may change node server "v2"/, '7. nor by ALTER SERVER that drops what trusted it');
is($coordinator->safe_psql('postgres', qq{SELECT ringshard.set_node_address('v2', '$v2 connect_timeout=3')}),
	qq{node "v2" is at connect_timeout='3' dbname='postgres' host='} . $workers[1]->host . q{' port='} . $workers[1]->port . q{' (server v2)},
	'7. a superuser may');

#
# 8. One role's failing mapping does not hold back every other role's
#    queued writes.
#
$coordinator->safe_psql('postgres', q{
	CREATE TABLE public.q (id bigint PRIMARY KEY, who text);
	SELECT ringshard.distribute_table('public.q', 'id');
	SELECT ringshard.create_distributed_table('public.q');
	GRANT SELECT, INSERT ON public.q TO alice, bob;
});
$_->safe_psql('postgres', q{GRANT SELECT, INSERT ON public.q TO alice, bob}) for @workers;
$coordinator->safe_psql('postgres', q{SELECT ringshard.mark_node_down('v2')});
as_role($coordinator, 'alice', q{SET client_min_messages = error; INSERT INTO public.q VALUES (1, 'alice')});
as_role($coordinator, 'bob', q{SET client_min_messages = error; INSERT INTO public.q VALUES (2, 'bob')});
is($coordinator->safe_psql('postgres', q{SELECT string_agg(writer::text, ',' ORDER BY ordinal) FROM ringshard.write_queue WHERE node_name = 'v2'}),
	'alice,bob', '8. both writes wait for v2, alice\'s first');
# alice's password on v2 changes; her mapping still has the old one
$workers[1]->safe_psql('postgres', q{SET password_encryption = 'scram-sha-256'; ALTER ROLE alice PASSWORD 'changed'});
is($coordinator->safe_psql('postgres', q{SET ringshard.replay_max_attempts = 2; SELECT ringshard.replay_queue('v2')}), '1',
	'8. bob\'s write is delivered past alice\'s, which v2 refuses to her');
is($workers[1]->safe_psql('postgres', q{SELECT string_agg(who, ',') FROM public.q}), 'bob', '8. v2 has bob\'s row');
$coordinator->safe_psql('postgres', q{SET ringshard.replay_max_attempts = 2; SELECT ringshard.replay_queue('v2')});
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}) . '/'
	. $coordinator->safe_psql('postgres', q{SELECT writer::text || ' ' || attempts FROM ringshard.dead_letters}),
	'0/alice 2', '8. alice\'s write is set aside as a dead letter after ringshard.replay_max_attempts failures');

#
# 9. A forged prepared transaction on a worker; the coordinator's id.
#
($rc, $out, $err) = as_role($coordinator, 'bob', q{SELECT coordinator_id FROM ringshard.cluster_state});
like($err, qr/permission denied for table cluster_state/, '9. an ordinary role cannot read the coordinator\'s id');
is(as_role($coordinator, 'bob', q{SELECT topology_version > 0 FROM ringshard.cluster_state}) == 0 ? 'readable' : 'not',
	'readable', '9. the rest of cluster_state stays readable');
# bob on v1, knowing the id, prepares a transaction named as alice's part
my $gid = $coordinator->safe_psql('postgres', q{
	SELECT format('rs_%s_%s_1_500_%s_%s', replace(coordinator_id::text, '-', ''),
	              (SELECT system_identifier FROM pg_control_system()),
	              (SELECT oid FROM pg_roles WHERE rolname = 'alice'),
	              (SELECT oid FROM pg_foreign_server WHERE srvname = 'v1'))
	  FROM ringshard.cluster_state});
($rc, $out, $err) = as_role($workers[0], 'bob', qq{BEGIN; SELECT 1; PREPARE TRANSACTION '$gid'});
is($rc, 0, '9. bob prepares a transaction with a name of the coordinator\'s') or diag($err);
($rc, $out, $err) = $coordinator->psql('postgres',
	q{SELECT node || ' ' || committed || ' ' || rolled_back || ' ' || in_progress || ' ' || coalesce(error, 'ok') FROM ringshard.recover_prepared_transactions() WHERE node = 'v1'});
is($out, 'v1 0 0 1 ok', '9. recovery leaves it alone without failing on the node');
like($err, qr/was prepared by role "bob", not by the role its name gives/, '9. and says why');
$workers[0]->safe_psql('postgres', qq{ROLLBACK PREPARED '$gid'});

is(is_superuser($_, 'radmin') . is_superuser($_, 'bob'), 'ff', 'no role became superuser on ' . $_->name)
  for ($coordinator, @workers);

$_->stop for ($coordinator, @workers);
done_testing();
