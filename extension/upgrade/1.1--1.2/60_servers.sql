-- Node addresses and the server account's own credentials (docs/security.md):
-- since 1.2 only an address a superuser gave (server option
-- ambient_credentials 'true', which set_node_address() adds for a superuser)
-- lets superusers and the watchdog connect with the server account's
-- .pgpass, certificates or peer login; any other needs a user mapping with a
-- password for every role, superusers included.  1.1 did not record who gave
-- an address, so the update trusts none of them: it names each, with the
-- statement a superuser who has checked the address runs to trust it.
DO $servers$
DECLARE
	untrusted text;
	statements text;
BEGIN
	SELECT pg_catalog.string_agg(pg_catalog.format('%s (%s)', n.node_name, ringshard.server_address(n.server_name)), ', '
	                             ORDER BY n.node_name),
	       pg_catalog.string_agg(pg_catalog.format('ALTER SERVER %I OPTIONS (ADD ambient_credentials ''true'');',
	                                               n.server_name), ' ' ORDER BY n.node_name)
	  INTO untrusted, statements
	  FROM ringshard.nodes n JOIN pg_catalog.pg_foreign_server s ON s.srvname OPERATOR(pg_catalog.=) n.server_name
	 WHERE NOT EXISTS (SELECT FROM pg_catalog.unnest(s.srvoptions) o WHERE o LIKE 'ambient\_credentials=%');
	IF untrusted IS NOT NULL THEN
		RAISE WARNING 'superusers and the watchdog now need a user mapping with a password for these nodes: %', untrusted
			USING DETAIL = 'ringshard 1.2 offers the server account''s own credentials (password file, certificates, peer) only to addresses a superuser gave; 1.1 did not record who gave these.',
			      HINT = 'Check each address, then, as a superuser: ' || statements;
	END IF;
END
$servers$;
