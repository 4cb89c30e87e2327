-- A description of every object of the extension ringshard in the current
-- database, one line per fact, sorted: members (with comments), function
-- definitions (source, volatility, parallel safety, strictness, security,
-- settings, arguments with their names and defaults, result), aggregates,
-- columns (order, type, default, collation, privileges, comments), tables'
-- constraints, indexes and triggers, views, sequences, types, operators,
-- operator classes and families, casts, schemas, the wrapper and server,
-- event triggers, initial privileges (what pg_dump leaves out), the version
-- and the tables pg_dump saves the rows of.  Two databases with equal
-- descriptions have the same extension objects (test/t/013_upgrade.pl).
WITH member AS (
	SELECT d.classid, d.objid, d.objsubid, (pg_identify_object(d.classid, d.objid, d.objsubid)).*
	  FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard'
	 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e')
SELECT line FROM (
	-- every member, with its comment
	SELECT format('%s %s comment=%s', m.type, m.identity, coalesce(obj_description(m.objid, m.classid::regclass::name), '-')) AS line FROM member m
	UNION ALL
	SELECT format('function %s: %s acl=%s', m.identity, replace(pg_get_functiondef(p.oid), E'\n', ' \n '),
	              coalesce((SELECT string_agg(y.e, ',' ORDER BY y.e) FROM (SELECT format('%s:%s:%s', CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END, x.privilege_type, x.is_grantable) AS e FROM aclexplode(p.proacl) x) y), 'default'))
	  FROM member m JOIN pg_proc p ON p.oid = m.objid WHERE m.classid = 'pg_proc'::regclass AND p.prokind IN ('f', 'p')
	UNION ALL
	SELECT format('aggregate %s: %s', m.identity, row(a.aggkind, a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggsortop::regoperator, a.aggtranstype::regtype, a.agginitval, p.proparallel))
	  FROM member m JOIN pg_aggregate a ON a.aggfnoid = m.objid JOIN pg_proc p ON p.oid = a.aggfnoid WHERE m.classid = 'pg_proc'::regclass
	UNION ALL
	SELECT format('column %s.%s: #%s %s notnull=%s default=%s collation=%s identity=%s generated=%s acl=%s comment=%s', m.identity, a.attname,
	              rank() OVER (PARTITION BY m.objid ORDER BY a.attnum), format_type(a.atttypid, a.atttypmod), a.attnotnull,
	              pg_get_expr(ad.adbin, ad.adrelid), a.attcollation::regcollation, a.attidentity, a.attgenerated,
	              coalesce((SELECT string_agg(y.e, ',' ORDER BY y.e) FROM (SELECT format('%s:%s', CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END, x.privilege_type) AS e FROM aclexplode(a.attacl) x) y), 'default'),
	              coalesce(col_description(a.attrelid, a.attnum), '-'))
	  FROM member m JOIN pg_attribute a ON a.attrelid = m.objid AND a.attnum > 0 AND NOT a.attisdropped
	  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
	 WHERE m.classid = 'pg_class'::regclass
	UNION ALL
	SELECT format('relation %s: kind=%s persistence=%s options=%s acl=%s', m.identity, c.relkind, c.relpersistence, c.reloptions,
	              coalesce((SELECT string_agg(y.e, ',' ORDER BY y.e) FROM (SELECT format('%s:%s:%s', CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END, x.privilege_type, x.is_grantable) AS e FROM aclexplode(c.relacl) x) y), 'default'))
	  FROM member m JOIN pg_class c ON c.oid = m.objid WHERE m.classid = 'pg_class'::regclass
	UNION ALL
	SELECT format('constraint %s on %s: %s', co.conname, m.identity, pg_get_constraintdef(co.oid))
	  FROM member m JOIN pg_constraint co ON co.conrelid = m.objid WHERE m.classid = 'pg_class'::regclass
	UNION ALL
	SELECT format('index %s on %s: %s', i.indexrelid::regclass, m.identity, pg_get_indexdef(i.indexrelid))
	  FROM member m JOIN pg_index i ON i.indrelid = m.objid WHERE m.classid = 'pg_class'::regclass
	UNION ALL
	SELECT format('trigger %s on %s: %s enabled=%s', t.tgname, m.identity, pg_get_triggerdef(t.oid), t.tgenabled)
	  FROM member m JOIN pg_trigger t ON t.tgrelid = m.objid AND NOT t.tgisinternal WHERE m.classid = 'pg_class'::regclass
	UNION ALL
	SELECT format('view %s: %s', m.identity, replace(pg_get_viewdef(m.objid, true), E'\n', ' \n '))
	  FROM member m JOIN pg_class c ON c.oid = m.objid AND c.relkind = 'v' WHERE m.classid = 'pg_class'::regclass
	UNION ALL
	SELECT format('sequence %s: %s owned_by=%s', m.identity, row(s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmax, s.seqmin, s.seqcache, s.seqcycle),
	              (SELECT format('%s.%s', d.refobjid::regclass, a.attname) FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
	                WHERE d.classid = 'pg_class'::regclass AND d.objid = m.objid AND d.deptype = 'a'))
	  FROM member m JOIN pg_sequence s ON s.seqrelid = m.objid WHERE m.classid = 'pg_class'::regclass
	UNION ALL
	SELECT format('type %s: %s', m.identity, row(t.typlen, t.typbyval, t.typtype, t.typcategory, t.typinput, t.typoutput, t.typreceive, t.typsend, t.typalign, t.typstorage, t.typacl))
	  FROM member m JOIN pg_type t ON t.oid = m.objid WHERE m.classid = 'pg_type'::regclass
	UNION ALL
	SELECT format('operator %s: %s', m.identity, row(o.oprkind, o.oprcanmerge, o.oprcanhash, o.oprresult::regtype, o.oprcode, o.oprcom::regoperator, o.oprnegate::regoperator, o.oprrest, o.oprjoin))
	  FROM member m JOIN pg_operator o ON o.oid = m.objid WHERE m.classid = 'pg_operator'::regclass
	UNION ALL
	SELECT format('opfamily %s: op %s %s %s', m.identity, ao.amopstrategy, ao.amopopr::regoperator, ao.amoppurpose)
	  FROM member m JOIN pg_amop ao ON ao.amopfamily = m.objid WHERE m.classid = 'pg_opfamily'::regclass
	UNION ALL
	SELECT format('opfamily %s: proc %s %s', m.identity, ap.amprocnum, ap.amproc::regprocedure)
	  FROM member m JOIN pg_amproc ap ON ap.amprocfamily = m.objid WHERE m.classid = 'pg_opfamily'::regclass
	UNION ALL
	SELECT format('opclass %s: %s', m.identity, row(oc.opcmethod, (SELECT f.opfname FROM pg_opfamily f WHERE f.oid = oc.opcfamily), oc.opcintype::regtype, oc.opcdefault, oc.opckeytype))
	  FROM member m JOIN pg_opclass oc ON oc.oid = m.objid WHERE m.classid = 'pg_opclass'::regclass
	UNION ALL
	SELECT format('cast %s: %s', m.identity, row(c.castfunc::regprocedure, c.castcontext, c.castmethod))
	  FROM member m JOIN pg_cast c ON c.oid = m.objid WHERE m.classid = 'pg_cast'::regclass
	UNION ALL
	SELECT format('schema %s: owner=%s acl=%s', m.identity, n.nspowner::regrole, n.nspacl)
	  FROM member m JOIN pg_namespace n ON n.oid = m.objid WHERE m.classid = 'pg_namespace'::regclass
	UNION ALL
	SELECT format('wrapper %s: %s', m.identity, row(w.fdwhandler::regproc, w.fdwvalidator::regproc, w.fdwacl, w.fdwoptions))
	  FROM member m JOIN pg_foreign_data_wrapper w ON w.oid = m.objid WHERE m.classid = 'pg_foreign_data_wrapper'::regclass
	UNION ALL
	SELECT format('server %s: %s', m.identity, row(s.srvtype, s.srvversion, s.srvacl, s.srvoptions, s.srvowner::regrole))
	  FROM member m JOIN pg_foreign_server s ON s.oid = m.objid WHERE m.classid = 'pg_foreign_server'::regclass
	UNION ALL
	SELECT format('event trigger %s: %s', m.identity, row(e.evtevent, e.evtfoid::regprocedure, e.evtenabled, e.evttags))
	  FROM member m JOIN pg_event_trigger e ON e.oid = m.objid WHERE m.classid = 'pg_event_trigger'::regclass
	UNION ALL
	SELECT format('initial privileges %s: %s %s', m.identity, i.privtype,
	              (SELECT string_agg(y.e, ',' ORDER BY y.e) FROM (SELECT format('%s:%s:%s', CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END, x.privilege_type, x.is_grantable) AS e FROM aclexplode(i.initprivs) x) y))
	  FROM member m JOIN pg_init_privs i ON i.classoid = m.classid AND i.objoid = m.objid AND i.objsubid = m.objsubid
	UNION ALL
	SELECT format('initial column privileges %s.%s: %s %s', m.identity, a.attname, i.privtype,
	              (SELECT string_agg(y.e, ',' ORDER BY y.e) FROM (SELECT format('%s:%s:%s', CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END, x.privilege_type, x.is_grantable) AS e FROM aclexplode(i.initprivs) x) y))
	  FROM member m JOIN pg_init_privs i ON i.classoid = m.classid AND i.objoid = m.objid AND i.objsubid > 0
	  JOIN pg_attribute a ON a.attrelid = i.objoid AND a.attnum = i.objsubid
	 WHERE m.classid = 'pg_class'::regclass
	UNION ALL
	SELECT format('extension: version=%s relocatable=%s schema=%s', e.extversion, e.extrelocatable, e.extnamespace::regnamespace)
	  FROM pg_extension e WHERE e.extname = 'ringshard'
	UNION ALL
	SELECT format('dumped configuration: %s %s', c.cfg::regclass, c.cond)
	  FROM pg_extension e, unnest(e.extconfig, e.extcondition) c(cfg, cond) WHERE e.extname = 'ringshard'
) x ORDER BY line COLLATE "C";
