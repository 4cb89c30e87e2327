-- Nodes with an address become foreign servers, as add_node() makes them in
-- 1.1 (ringshard_internal.set_server).  A user name in the address becomes a
-- user mapping for PUBLIC with that user and no password: superusers
-- connect as that user, as they did under 1.0; a role below superuser needs
-- a mapping of its own with a password (docs/security.md).  The servers and
-- mappings belong to the cluster, not to the extension: pg_dump keeps them.
DO $servers$
DECLARE
	node record;
	address text;
	login text;
BEGIN
	FOR node IN SELECT a.node_name, a.address FROM ringshard_internal.addresses_1_0 a ORDER BY a.node_name COLLATE "C" LOOP
		SELECT string_agg(format('%s=''%s''', o.option, replace(replace(o.value, '\', '\\'), '''', '\''')), ' ' ORDER BY o.option)
		         FILTER (WHERE o.option <> 'user'),
		       min(o.value) FILTER (WHERE o.option = 'user')
		  INTO address, login
		  FROM ringshard_internal.address_options_as_given(node.address) o;
		PERFORM ringshard_internal.set_server(node.node_name, coalesce(address, ''));
		EXECUTE format('ALTER EXTENSION ringshard DROP SERVER %I', node.node_name);
		IF login IS NOT NULL THEN
			EXECUTE format('CREATE USER MAPPING FOR PUBLIC SERVER %I OPTIONS (user %L)', node.node_name, login);
			RAISE WARNING 'node "%": the user name of its address is in a user mapping for PUBLIC now', node.node_name
				USING DETAIL = format('CREATE USER MAPPING FOR PUBLIC SERVER %I OPTIONS (user %L)', node.node_name, login),
				      HINT = 'Superusers connect as that user, as under 1.0; other roles need a user mapping of their own, with a password.';
		END IF;
	END LOOP;
END
$servers$;
DROP TABLE ringshard_internal.addresses_1_0;
