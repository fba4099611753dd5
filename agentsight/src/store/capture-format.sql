
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE clock_anchors (
    id INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    mono_ns INTEGER NOT NULL,
    wall_ns INTEGER NOT NULL
);
CREATE TABLE programs (
    name TEXT PRIMARY KEY,
    hook TEXT NOT NULL,
    attached INTEGER NOT NULL,
    error TEXT
);
CREATE TABLE loss (kind TEXT PRIMARY KEY, lost INTEGER NOT NULL);
CREATE TABLE gaps (
    id INTEGER PRIMARY KEY,
    stream INTEGER NOT NULL DEFAULT 0,
    cpu INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    missing INTEGER NOT NULL,
    from_mono_ns INTEGER NOT NULL,
    to_mono_ns INTEGER NOT NULL
);
CREATE TABLE processes (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    start_mono_ns INTEGER NOT NULL,
    parent_id INTEGER REFERENCES processes(id),
    ppid INTEGER,
    origin TEXT NOT NULL,
    comm TEXT,
    argv TEXT,
    argv_truncated INTEGER NOT NULL DEFAULT 0,
    cwd TEXT,
    exe TEXT,
    uid INTEGER,
    gid INTEGER,
    exec_count INTEGER NOT NULL DEFAULT 0,
    end_mono_ns INTEGER,
    exit_code INTEGER,
    signal INTEGER,
    core_dumped INTEGER,
    container_id TEXT,
    container_name TEXT,
    container_image TEXT,
    pid_ns INTEGER,
    mnt_ns INTEGER,
    ns_pid INTEGER,
    agent TEXT,
    UNIQUE (pid, start_mono_ns)
);
CREATE TABLE strings (id INTEGER PRIMARY KEY, s TEXT NOT NULL, prefix INTEGER);
CREATE TABLE event_rows (
    id INTEGER PRIMARY KEY,
    mono_ns INTEGER NOT NULL,
    anchor INTEGER,
    wall_ns INTEGER,
    kind NOT NULL,
    cpu INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    tid INTEGER,
    ppid INTEGER NOT NULL,
    uid INTEGER NOT NULL,
    gid INTEGER NOT NULL,
    comm NOT NULL,
    process_id INTEGER,
    result INTEGER,
    fd INTEGER,
    path,
    path_as_given,
    path_status,
    errno,
    flags,
    mode INTEGER,
    real_path,
    real_path_status,
    dev INTEGER,
    ino INTEGER,
    repeat INTEGER,
    bytes INTEGER,
    count INTEGER,
    read_bytes INTEGER,
    read_count INTEGER,
    old_path,
    old_path_as_given,
    new_path,
    new_path_as_given,
    family,
    addr,
    port INTEGER,
    query,
    tcp_state,
    child_pid INTEGER,
    child_process_id INTEGER,
    filename,
    argv,
    argc INTEGER,
    argv_truncated INTEGER,
    argv_incomplete INTEGER,
    cwd,
    cwd_status,
    exe,
    exe_status,
    exit_code INTEGER,
    signal INTEGER,
    core_dumped INTEGER
);
CREATE VIEW events AS SELECT
    r.id AS id,
    r.mono_ns AS mono_ns,
    COALESCE(r.wall_ns, r.mono_ns + (SELECT a.wall_ns - a.mono_ns FROM clock_anchors a WHERE a.id = r.anchor)) AS wall_ns,
    CASE typeof(r.kind) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.kind) ELSE r.kind END AS kind,
    r.cpu AS cpu,
    r.seq AS seq,
    r.pid AS pid,
    COALESCE(r.tid, r.pid) AS tid,
    r.ppid AS ppid,
    r.uid AS uid,
    r.gid AS gid,
    CASE typeof(r.comm) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.comm) ELSE r.comm END AS comm,
    r.process_id AS process_id,
    r.child_pid AS child_pid,
    r.child_process_id AS child_process_id,
    CASE typeof(r.filename) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.filename) ELSE r.filename END AS filename,
    CASE typeof(r.argv) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.argv) ELSE r.argv END AS argv,
    r.argc AS argc,
    r.argv_truncated AS argv_truncated,
    r.argv_incomplete AS argv_incomplete,
    CASE typeof(r.cwd) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.cwd) ELSE r.cwd END AS cwd,
    CASE typeof(r.cwd_status) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.cwd_status) ELSE r.cwd_status END AS cwd_status,
    CASE typeof(r.exe) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.exe) ELSE r.exe END AS exe,
    CASE typeof(r.exe_status) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.exe_status) ELSE r.exe_status END AS exe_status,
    r.result AS result,
    CASE typeof(r.errno) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.errno) ELSE r.errno END AS errno,
    r.exit_code AS exit_code,
    r.signal AS signal,
    r.core_dumped AS core_dumped,
    r.fd AS fd,
    CASE typeof(r.path) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.path) ELSE r.path END AS path,
    CASE typeof(r.path_as_given) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.path_as_given) ELSE r.path_as_given END AS path_as_given,
    CASE typeof(r.path_status) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.path_status) ELSE r.path_status END AS path_status,
    CASE typeof(r.flags) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.flags) ELSE r.flags END AS flags,
    r.mode AS mode,
    CASE typeof(r.old_path) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.old_path) ELSE r.old_path END AS old_path,
    CASE typeof(r.old_path_as_given) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.old_path_as_given) ELSE r.old_path_as_given END AS old_path_as_given,
    CASE typeof(r.new_path) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.new_path) ELSE r.new_path END AS new_path,
    CASE typeof(r.new_path_as_given) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.new_path_as_given) ELSE r.new_path_as_given END AS new_path_as_given,
    r.bytes AS bytes,
    r.count AS count,
    r.read_bytes AS read_bytes,
    r.read_count AS read_count,
    CASE typeof(r.family) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.family) ELSE r.family END AS family,
    CASE typeof(r.addr) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.addr) ELSE r.addr END AS addr,
    r.port AS port,
    CASE typeof(r.query) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.query) ELSE r.query END AS query,
    CASE typeof(r.tcp_state) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.tcp_state) ELSE r.tcp_state END AS tcp_state,
    r.repeat AS repeat,
    CASE typeof(r.real_path) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.real_path) ELSE r.real_path END AS real_path,
    CASE typeof(r.real_path_status) WHEN 'integer' THEN (SELECT CASE WHEN p.prefix IS NULL THEN p.s ELSE (SELECT q.s FROM strings q WHERE q.id = p.prefix) || p.s END FROM strings p WHERE p.id = r.real_path_status) ELSE r.real_path_status END AS real_path_status,
    r.dev AS dev,
    r.ino AS ino
FROM event_rows r;
CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
    INSERT INTO event_rows (id, mono_ns, wall_ns, kind, cpu, seq, pid, tid, ppid, uid, gid, comm, process_id, child_pid, child_process_id, filename, argv, argc, argv_truncated, argv_incomplete, cwd, cwd_status, exe, exe_status, result, errno, exit_code, signal, core_dumped, fd, path, path_as_given, path_status, flags, mode, old_path, old_path_as_given, new_path, new_path_as_given, bytes, count, read_bytes, read_count, family, addr, port, query, tcp_state, repeat, real_path, real_path_status, dev, ino) VALUES (NEW.id, NEW.mono_ns, NEW.wall_ns, NEW.kind, NEW.cpu, NEW.seq, NEW.pid, NEW.tid, NEW.ppid, NEW.uid, NEW.gid, NEW.comm, NEW.process_id, NEW.child_pid, NEW.child_process_id, NEW.filename, NEW.argv, NEW.argc, NEW.argv_truncated, NEW.argv_incomplete, NEW.cwd, NEW.cwd_status, NEW.exe, NEW.exe_status, NEW.result, NEW.errno, NEW.exit_code, NEW.signal, NEW.core_dumped, NEW.fd, NEW.path, NEW.path_as_given, NEW.path_status, NEW.flags, NEW.mode, NEW.old_path, NEW.old_path_as_given, NEW.new_path, NEW.new_path_as_given, NEW.bytes, NEW.count, NEW.read_bytes, NEW.read_count, NEW.family, NEW.addr, NEW.port, NEW.query, NEW.tcp_state, NEW.repeat, NEW.real_path, NEW.real_path_status, NEW.dev, NEW.ino);
END;
CREATE TRIGGER events_update INSTEAD OF UPDATE ON events BEGIN
    UPDATE event_rows SET anchor = NULL, id = NEW.id, mono_ns = NEW.mono_ns, wall_ns = NEW.wall_ns, kind = NEW.kind, cpu = NEW.cpu, seq = NEW.seq, pid = NEW.pid, tid = NEW.tid, ppid = NEW.ppid, uid = NEW.uid, gid = NEW.gid, comm = NEW.comm, process_id = NEW.process_id, child_pid = NEW.child_pid, child_process_id = NEW.child_process_id, filename = NEW.filename, argv = NEW.argv, argc = NEW.argc, argv_truncated = NEW.argv_truncated, argv_incomplete = NEW.argv_incomplete, cwd = NEW.cwd, cwd_status = NEW.cwd_status, exe = NEW.exe, exe_status = NEW.exe_status, result = NEW.result, errno = NEW.errno, exit_code = NEW.exit_code, signal = NEW.signal, core_dumped = NEW.core_dumped, fd = NEW.fd, path = NEW.path, path_as_given = NEW.path_as_given, path_status = NEW.path_status, flags = NEW.flags, mode = NEW.mode, old_path = NEW.old_path, old_path_as_given = NEW.old_path_as_given, new_path = NEW.new_path, new_path_as_given = NEW.new_path_as_given, bytes = NEW.bytes, count = NEW.count, read_bytes = NEW.read_bytes, read_count = NEW.read_count, family = NEW.family, addr = NEW.addr, port = NEW.port, query = NEW.query, tcp_state = NEW.tcp_state, repeat = NEW.repeat, real_path = NEW.real_path, real_path_status = NEW.real_path_status, dev = NEW.dev, ino = NEW.ino WHERE id = OLD.id;
END;
CREATE TRIGGER events_delete INSTEAD OF DELETE ON events BEGIN
    DELETE FROM event_rows WHERE id = OLD.id;
END;

CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    session_id TEXT NOT NULL,
    source_path TEXT NOT NULL,
    cwd TEXT,
    start_ms INTEGER,
    end_ms INTEGER,
    model TEXT NOT NULL,
    UNIQUE (provider, session_id)
);
CREATE TABLE IF NOT EXISTS transcript_files (
    id INTEGER PRIMARY KEY,
    session_row INTEGER NOT NULL REFERENCES sessions(id),
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    stored_bytes INTEGER NOT NULL,
    truncated INTEGER NOT NULL,
    content BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS trees (
    id INTEGER PRIMARY KEY,
    root_process_id INTEGER NOT NULL REFERENCES processes(id),
    root_pid INTEGER NOT NULL,
    root_start_mono_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    note TEXT
);
CREATE TABLE IF NOT EXISTS bindings (
    id INTEGER PRIMARY KEY,
    tree_id INTEGER NOT NULL REFERENCES trees(id),
    session_row INTEGER NOT NULL REFERENCES sessions(id),
    evidence TEXT NOT NULL,
    evidence_count INTEGER NOT NULL,
    evidence_process_id INTEGER REFERENCES processes(id),
    evidence_path TEXT,
    first_evidence_mono_ns INTEGER,
    from_mono_ns INTEGER NOT NULL,
    to_mono_ns INTEGER
);
CREATE TABLE IF NOT EXISTS proc_fd_evidence (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    start_mono_ns INTEGER NOT NULL,
    mono_ns INTEGER NOT NULL,
    path TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS correlations (
    id INTEGER PRIMARY KEY,
    session_row INTEGER NOT NULL REFERENCES sessions(id),
    tool_index INTEGER,
    call_id TEXT,
    -- an `events` id; no REFERENCES: `events` is a view in captures with
    -- interned text (store::layout), and a foreign key cannot name a view
    event_id INTEGER,
    process_id INTEGER REFERENCES processes(id),
    role TEXT NOT NULL,
    reason TEXT,
    late INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS external_messages (
    id TEXT NOT NULL UNIQUE,
    time_ms INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    transport TEXT NOT NULL,
    container TEXT,
    invoking_uid INTEGER NOT NULL,
    invoking_user TEXT NOT NULL,
    run_as_uid INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    provider_pid INTEGER,
    message_bytes INTEGER NOT NULL,
    outcome TEXT,
    detail TEXT,
    finished_ms INTEGER
);
