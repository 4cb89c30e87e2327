# The attacks and losses of the 1.0 review, each tried against 1.1 on
# separate servers (coordinator and two workers; peer and trust for the
# server's own account, scram-sha-256 for ordinary roles):
#  - ringshard_admin -> superuser through a node that logs in as the server's
#    account (an address with user=, a user mapping without a password, a
#    password the node never asks for, a queued write replayed as a
#    superuser);
#  - acknowledged writes lost: records pre-filled on a worker, a queue
#    sequence set back;
#  - queued writes replayed with the writer's privileges, a refused one set
#    aside, error texts visible only to their writer;
#  - sync_topology stuck after a partial commit;
#  - node_health() showing another role's errors; cluster_get without SELECT.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("s$_") } 1 .. 2;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	# the server's own account: peer on the socket; ordinary roles: a password
	my $os_user = getpwuid($<);
	$node->append_conf('pg_hba.conf', '');
	open(my $hba, '>', $node->data_dir . '/pg_hba.conf') or die;
	print $hba "local all $os_user peer\n";
	print $hba "local all trusted trust\n";
	print $hba "local all all scram-sha-256\n";
	close($hba);
	$node->start;
	$node->safe_psql('postgres', q{
		SET password_encryption = 'scram-sha-256';
		CREATE EXTENSION ringshard;
		CREATE ROLE radmin LOGIN PASSWORD 'radmin-pw' IN ROLE ringshard_admin;
		CREATE ROLE alice LOGIN PASSWORD 'alice-pw';
		CREATE ROLE bob LOGIN PASSWORD 'bob-pw';
		CREATE ROLE trusted LOGIN;
	});
}

my $setup = '';
for my $i (1 .. 2)
{
	my $w = $workers[ $i - 1 ];
	$setup .= sprintf("SELECT ringshard.add_node('s%d', 'host=%s port=%d dbname=postgres');", $i, $w->host, $w->port);
}
$setup .= q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE items (id bigint PRIMARY KEY, owner text, payload text);
	SELECT ringshard.distribute_table('items', 'id');
	SELECT ringshard.create_distributed_table('items');
	GRANT SELECT, INSERT ON items TO alice, bob;
	CREATE USER MAPPING FOR alice SERVER s1 OPTIONS (user 'alice', password 'alice-pw');
	CREATE USER MAPPING FOR alice SERVER s2 OPTIONS (user 'alice', password 'alice-pw');
	CREATE USER MAPPING FOR bob SERVER s1 OPTIONS (user 'bob', password 'bob-pw');
	CREATE USER MAPPING FOR bob SERVER s2 OPTIONS (user 'bob', password 'bob-pw');
};
$coordinator->safe_psql('postgres', $setup);
$_->safe_psql('postgres', q{GRANT SELECT, INSERT ON items TO alice, bob; GRANT USAGE ON SCHEMA ringshard TO alice, bob;})
  for @workers;


#
# ringshard_admin -> superuser (issue 11, item 2)
#
my $self = sprintf('host=%s port=%d dbname=postgres', $coordinator->host, $coordinator->port);
$ENV{PGPASSWORD} = 'radmin-pw';
my ($rc, $out, $err) = $coordinator->psql('postgres', qq{
	SELECT ringshard.create_ring('x');
	SELECT ringshard.add_node('evil', '$self user=postgres', 'x');
}, extra_params => [ '-U', 'radmin' ]);
like($err, qr/a node address may not set "user"/, 'an address may not carry a user');

# The node is added without one; radmin maps itself to the server account.
my $os_user = getpwuid($<);
($rc, $out, $err) = $coordinator->psql('postgres', qq{
	SELECT ringshard.add_node('evil', '$self', 'x');
	CREATE USER MAPPING FOR radmin SERVER evil OPTIONS (user '$os_user');
	SELECT ok, error FROM ringshard.node_execute(ARRAY['evil'], 'ALTER ROLE radmin SUPERUSER', '{}', false);
}, extra_params => [ '-U', 'radmin' ]);
# node_execute answers per node: the refusal is that node's error (or the call's, before any node is tried)
like("$out$err", qr/password is required to connect to node "evil"/, 'a mapping without a password is refused (peer would log in)');
unlike($out, qr/^t\|/m, 'and the statement did not run there');
($rc, $out, $err) = $coordinator->psql('postgres', qq{
	ALTER USER MAPPING FOR radmin SERVER evil OPTIONS (ADD password 'guess');
	SELECT ok, error FROM ringshard.node_execute(ARRAY['evil'], 'ALTER ROLE radmin SUPERUSER', '{}', false);
}, extra_params => [ '-U', 'radmin' ]);
like($err, qr/The node did not ask for the password of the user mapping/, 'a password peer authentication never asks for is refused');
($rc, $out, $err) = $coordinator->psql('postgres', qq{
	ALTER USER MAPPING FOR radmin SERVER evil OPTIONS (SET user 'trusted');
	SELECT ok, error FROM ringshard.node_execute(ARRAY['evil'], 'SELECT 1', '{}', false);
}, extra_params => [ '-U', 'radmin' ]);
like($err, qr/The node did not ask for the password of the user mapping/, 'and so is one trust authentication never asks for');
($rc, $out, $err) = $coordinator->psql('postgres', q{ALTER USER MAPPING FOR radmin SERVER evil OPTIONS (ADD password_required 'false')},
	extra_params => [ '-U', 'radmin' ]);
like($err, qr/password_required=false is superuser-only/, 'only a superuser may waive the password');
($rc, $out, $err) = $coordinator->psql('postgres', q{CREATE SERVER evil2 FOREIGN DATA WRAPPER ringshard OPTIONS (host '/tmp', passfile '/etc/passwd')},
	extra_params => [ '-U', 'radmin' ]);
like($err, qr/option "passfile" is not allowed on a ringshard node/, 'a server cannot bring in a password file');
# A queued write names the role it is replayed as: administrators cannot forge one.
($rc, $out, $err) = $coordinator->psql('postgres', q{
	INSERT INTO ringshard.write_queue (write_id, node_name, table_name, writer, payload)
	VALUES (gen_random_uuid(), 'evil', 'pg_authid', 'postgres', '{}')}, extra_params => [ '-U', 'radmin' ]);
like($err, qr/permission denied for table write_queue/, 'an administrator cannot queue a write as another role');
($rc, $out, $err) = $coordinator->psql('postgres', q{
	INSERT INTO ringshard.transaction_records (gid, node_name) VALUES ('rs_forged', 's1')}, extra_params => [ '-U', 'radmin' ]);
like($err, qr/permission denied for table transaction_records/, 'nor forge a commit record');
# A node pointing at a server of another wrapper is not a node.
$coordinator->safe_psql('postgres', q{CREATE EXTENSION postgres_fdw; CREATE SERVER other FOREIGN DATA WRAPPER postgres_fdw});
($rc, $out, $err) = $coordinator->psql('postgres', q{
	UPDATE ringshard.nodes SET server_name = 'other' WHERE node_name = 'evil';
	SELECT ok FROM ringshard.node_execute(ARRAY['evil'], 'SELECT 1', '{}', false);}, extra_params => [ '-U', 'radmin' ]);
like($err, qr/node "evil" has no server of the foreign-data wrapper ringshard/, 'a node uses servers of ringshard\'s wrapper only');
is($coordinator->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'radmin'}), 'f',
	'radmin never became superuser');
$coordinator->safe_psql('postgres', q{SELECT ringshard.drop_ring('x')});

#
# Ordinary roles write with their own credentials; nothing internal needs granting (item 3)
#
$ENV{PGPASSWORD} = 'alice-pw';
($rc, $out, $err) = $coordinator->psql('postgres', q{INSERT INTO items SELECT g, 'alice', 'a' || g FROM generate_series(1, 50) g},
	extra_params => [ '-U', 'alice' ]);
is($rc, 0, 'an ordinary role writes with its user mapping (scram) and no grant on ringshard\'s tables');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM items}), '50', 'its rows are there');

# (a) A role that may write on a worker cannot make the coordinator's writes vanish.
($rc, $out, $err) = $workers[0]->psql('postgres', q{
	INSERT INTO ringshard.replayed_writes SELECT (SELECT coordinator_id FROM ringshard.cluster_state), g FROM generate_series(1, 100000) g},
	extra_params => [ '-U', 'alice' ]);
isnt($rc, 0, 'there is no record of applied writes to pre-fill on a worker');
($rc, $out, $err) = $coordinator->psql('postgres', q{INSERT INTO items SELECT g, 'alice', 'b' || g FROM generate_series(51, 100) g},
	extra_params => [ '-U', 'alice' ]);
is($rc, 0, 'later writes succeed');
my $copies = 0;
$copies += $_->safe_psql('postgres', q{SELECT count(*) FROM items WHERE id BETWEEN 51 AND 100}) for @workers;
is($copies, 100, 'and every one is on both of its replicas');

# (b) The queue's order sequence set back (a restore): no queued write is lost or doubled.
$workers[1]->stop;
$coordinator->safe_psql('postgres', q{SELECT ringshard.mark_node_down('s2'); SELECT setval('ringshard.write_queue_ordinal_seq', 1)});
$ENV{PGPASSWORD} = 'alice-pw';
$coordinator->psql('postgres', q{SET client_min_messages = error; INSERT INTO items SELECT g, 'alice', 'c' || g FROM generate_series(101, 140) g},
	extra_params => [ '-U', 'alice' ]);
$coordinator->safe_psql('postgres', q{SELECT setval('ringshard.write_queue_ordinal_seq', 1)});
$coordinator->psql('postgres', q{SET client_min_messages = error; INSERT INTO items SELECT g, 'alice', 'd' || g FROM generate_series(141, 180) g},
	extra_params => [ '-U', 'alice' ]);
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}), '80',
	'every write for the stopped worker is queued once, each with its own id');
$workers[1]->start;
$coordinator->safe_psql('postgres', q{SELECT * FROM ringshard.watchdog_tick()});
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}), '0', 'the queue is delivered');
is($workers[1]->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id) FROM items WHERE id BETWEEN 101 AND 180}),
	'80|80', 'every queued write landed exactly once');

#
# Replays run with the writer's privileges (item 5)
#
$coordinator->safe_psql('postgres', q{SELECT ringshard.mark_node_down('s2')});
$ENV{PGPASSWORD} = 'bob-pw';
$coordinator->psql('postgres', q{SET client_min_messages = error; INSERT INTO items VALUES (1000, 'bob', 'bob-secret card 4111-1111')},
	extra_params => [ '-U', 'bob' ]);
$ENV{PGPASSWORD} = 'alice-pw';
$coordinator->psql('postgres', q{SET client_min_messages = error; INSERT INTO items VALUES (1001, 'alice', 'alice row')},
	extra_params => [ '-U', 'alice' ]);
# Then a DELETE (a statement: it waits behind any refused write of its
# table) and, after it, another role's row that the DELETE would remove if
# it overtook it: it must wait behind the waiting DELETE.
my $admin = $coordinator->safe_psql('postgres', 'SELECT current_user');
$coordinator->psql('postgres', q{SET client_min_messages = error; DELETE FROM items WHERE id = 1002});
$coordinator->psql('postgres', q{SET client_min_messages = error; INSERT INTO items VALUES (1002, 'alice', 'after the delete')},
	extra_params => [ '-U', 'alice' ]);
$workers[1]->safe_psql('postgres', q{REVOKE INSERT ON items FROM bob});
$coordinator->safe_psql('postgres', q{SELECT * FROM ringshard.watchdog_tick()});
is($coordinator->safe_psql('postgres', q{SELECT string_agg(writer::text || ':' || attempts, ',' ORDER BY ordinal) FROM ringshard.write_queue}),
	"bob:1,$admin:0,alice:0", 'a REVOKE on the worker holds for replays: bob\'s write is refused there, alice\'s first row went on, the DELETE and the row after it wait');
is($workers[1]->safe_psql('postgres', q{SELECT count(*) FROM items WHERE id = 1002}), '0',
	'the row written after the waiting DELETE did not overtake it');
is($workers[1]->safe_psql('postgres', q{SELECT count(*) FROM items WHERE id IN (1000, 1001)}), '1',
	'only alice\'s row reached the worker');
$ENV{PGPASSWORD} = 'alice-pw';
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT coalesce(last_error, '(hidden)') FROM ringshard.write_queue_status WHERE node = 's2'},
	extra_params => [ '-U', 'alice' ]);
is($out, '(hidden)', 'another role does not see the error text of bob\'s write');
$ENV{PGPASSWORD} = 'bob-pw';
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT last_error FROM ringshard.write_queue_status WHERE node = 's2'},
	extra_params => [ '-U', 'bob' ]);
like($out, qr/permission denied for table items/, 'bob sees why his write waits');
$coordinator->safe_psql('postgres', q{SET ringshard.replay_max_attempts = 2; SELECT * FROM ringshard.watchdog_tick()});
$coordinator->safe_psql('postgres', q{SELECT * FROM ringshard.watchdog_tick()});
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}) . '/'
	. $coordinator->safe_psql('postgres', q{SELECT node_name || ' ' || writer::text FROM ringshard.dead_letters}),
	'0/s2 bob', 'after ringshard.replay_max_attempts refusals it is set aside as a dead letter, and the writes behind it go on');
is($workers[1]->safe_psql('postgres', q{SELECT payload FROM items WHERE id = 1002}), 'after the delete',
	'in order: the DELETE, then the row written after it');
$workers[1]->safe_psql('postgres', q{GRANT INSERT ON items TO bob});

#
# sync_topology converges after a partial commit (item 7)
#
my $sync = $coordinator->background_psql('postgres', on_error_stop => 0);
$sync->query_safe('BEGIN');
$sync->query_safe('SELECT count(*) FROM ringshard.sync_topology()');
$workers[1]->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'ringshard %'});
$sync->query('COMMIT');
$sync->quit;
my $held = $coordinator->safe_psql('postgres', q{SELECT topology_version FROM ringshard.cluster_state});
is(join(',', map { $_->safe_psql('postgres', q{SELECT topology_version FROM ringshard.cluster_state}) } @workers),
	"$held,$held", 'a sync whose commit failed on one worker changed no worker (two-phase commit)');
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT count(*) FROM ringshard.sync_topology()});
is($rc, 0, 'the next sync succeeds');
# Even a worker left ahead (a 1.0 partial commit) is caught up by the next sync.
$workers[0]->safe_psql('postgres', q{UPDATE ringshard.cluster_state SET topology_version = topology_version + 1});
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT count(*) FROM ringshard.sync_topology()});
is($rc, 0, 'a worker one version ahead takes the next sync (an equal version is a retry)');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.recover_prepared_transactions() WHERE error IS NOT NULL}), '0',
	'recovery runs clean');
is(join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}) } @workers), '0,0',
	'no prepared transaction is left');

#
# node_health shows each role its own errors; cluster_get checks SELECT (items 8, 10)
#
$coordinator->safe_psql('postgres', q{SELECT ok FROM ringshard.node_execute(ARRAY['s1'], 'SELECT TOP-SECRET-COLUMN', '{}', false)});
$ENV{PGPASSWORD} = 'alice-pw';
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT string_agg(node || '=' || reachable || ':' || coalesce(last_error, ''), ',') FROM ringshard.node_health()},
	extra_params => [ '-U', 'alice' ]);
is($out, 's1=true:,s2=true:', 'node_health shows alice her own connections, not another role\'s errors');
$coordinator->safe_psql('postgres', q{CREATE ROLE carol LOGIN PASSWORD 'carol-pw'});
$ENV{PGPASSWORD} = 'carol-pw';
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT * FROM ringshard.cluster_get(NULL::items, '1')},
	extra_params => [ '-U', 'carol' ]);
like($err, qr/permission denied for (table|foreign table) items/, 'cluster_get checks SELECT on the table');
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT * FROM ringshard.cluster_fanout(NULL::items)},
	extra_params => [ '-U', 'carol' ]);
like($err, qr/permission denied for (table|foreign table) items/, 'and so does cluster_fanout');
delete $ENV{PGPASSWORD};

$_->stop for ($coordinator, @workers);
done_testing();
