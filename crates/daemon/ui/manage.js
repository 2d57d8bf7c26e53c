// The managing page (#/manage): pools, datasets with the MySQL layout, snapshots
// (take, clone, rollback with a confirmation of what is lost, destroy, holds), local FUSE
// mounts of each filesystem (mount at a typed path, unmount), NFS shares,
// volumes shared over iSCSI or NBD, every share with its clients, and replication
// relationships with their lag (create, run, pause, resume, break, resync, reverse,
// destroy), pairing with
// another appliance (make a pairing token there, pair here), MySQL snapshot sets (take,
// restore) and "clone to a running replica" with its progress (the job's events).
// Every action calls the REST API under /api/v1 (the same typed requests as the
// CLI) and shows its CLI equivalent; destructive ones ask first. The API token is
// typed in once and kept in sessionStorage: it travels only in the Authorization
// header, never in a URL. On a new appliance (no token yet, GET /api/v1/setup) the
// page asks for the one-time setup code from the appliance's root-only file and
// exchanges it for the first token (POST /api/v1/tokens/first), so a first run
// needs no CLI.
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  const KEY = "cachalot.token";
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const sh = (s) => (/^[\w@%+=:,./-]+$/.test(s) ? s : "'" + String(s).replace(/'/g, "'\\''") + "'");
  const size = (n) => {
    if (n === null || n === undefined) return "-";
    const u = ["B", "K", "M", "G", "T"]; let i = 0; let v = n;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i && v < 10 ? v.toFixed(1) : Math.round(v)) + u[i];
  };

  async function call(method, path, body) {
    const headers = { "Content-Type": "application/json" };
    const t = sessionStorage.getItem(KEY);
    if (t) headers.Authorization = "Bearer " + t;
    const r = await fetch("/api/v1" + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const v = await r.json().catch(() => null);
    if (!r.ok) throw new Error(v && v.error ? `${v.error.message} (${v.error.code})` : `HTTP ${r.status}`);
    return v;
  }

  function say(text, bad) {
    const m = $("m-msg");
    m.textContent = text;
    m.className = bad ? "bad" : "good";
    m.hidden = false;
  }

  // Run one or more steps; report the CLI equivalent on success.
  // The tables are refreshed before the report shows, so what the report says is
  // already on the page.
  async function act(cli, steps) {
    let err = null;
    try {
      for (const s of steps) await s();
    } catch (e) {
      err = e;
    }
    await refresh();
    if (err) say("Refused: " + err.message, true);
    else say("Done. CLI: " + cli);
  }

  // ---- the confirmation dialog ----
  function confirmDialog(title, lines, cli, okText, onOk) {
    $("m-confirm-title").textContent = title;
    $("m-confirm-body").innerHTML = "<ul>" + lines.map((l) => `<li>${esc(l)}</li>`).join("") + "</ul>";
    $("m-confirm-cli").textContent = cli;
    $("m-confirm-ok").textContent = okText;
    $("m-confirm").hidden = false;
    $("m-confirm-ok").onclick = async () => { $("m-confirm").hidden = true; await onOk(); };
  }

  // ---- CLI equivalents, live as the forms change ----
  function poolCli() {
    const files = $("m-pool-files").value.split(/[\s,]+/).filter(Boolean);
    return `cachalot pool create -s ${sh($("m-pool-size").value)} ${sh($("m-pool-name").value)} ${files.map(sh).join(" ")}`;
  }
  function mysqlCli() {
    const p = $("m-mysql-parent").value;
    return `cachalot create -p ${sh(p)} && cachalot create -o recordsize=16K ${sh(p + "/data")} && cachalot create -o recordsize=128K ${sh(p + "/log")}`;
  }
  const impCli = () => `cachalot pool import -d ${sh($("m-imp-dir").value)} ${sh($("m-imp-name").value)}`;
  const propSetCli = () => `cachalot set ${sh($("m-prop-name").value + "=" + $("m-prop-value").value)} ${sh($("m-prop-ds").value)}`;
  const propInheritCli = () => `cachalot inherit ${sh($("m-prop-name").value)} ${sh($("m-prop-ds").value)}`;
  const snapCli = () => `cachalot snapshot ${sh($("m-snap-ds").value + "@" + $("m-snap-name").value)}`;
  const cloneCli = () => `cachalot clone ${sh($("m-clone-src").value)} ${sh($("m-clone-target").value)}`;
  const nfsCli = () => `cachalot set sharenfs=${sh($("m-nfs-opts").value)} ${sh($("m-nfs-ds").value)}`;
  const volCli = () => `cachalot create -V ${sh($("m-vol-size").value)} ${sh($("m-vol-name").value)}`;
  const blkCli = (on) => `cachalot set share${$("m-blk-proto").value}=${on ? "on" : "off"} ${sh($("m-blk-vol").value)}`;
  const pairCli = () => `cachalot replication pair ${sh($("m-pair-addr").value)} TOKEN`;
  const replCli = () => `cachalot replication create --source ${sh($("m-repl-src").value)} --target ${sh($("m-repl-target").value)}` +
    ` --schedule ${sh($("m-repl-schedule").value)}${$("m-repl-paused").checked ? " --paused" : ""} ${sh($("m-repl-name").value)}`;
  const mySets = () => $("m-my-ds").value.split(",").map((x) => x.trim()).filter(Boolean);
  const myTakeCli = () => `cachalot mysql snapshot --socket ${sh($("m-my-sock").value)} ${sh(mySets().join(","))} ${sh($("m-my-snap").value)}`;
  const myCloneCli = () => `cachalot mysql clone --replica-of ${sh($("m-my-clone-of").value)}` +
    ($("m-my-clone-mp").value ? ` --mountpoint ${sh($("m-my-clone-mp").value)}` : "") +
    ` ${sh($("m-my-clone-src").value)} ${sh($("m-my-clone-target").value)}`;
  const sendCli = () => `cachalot send ${$("m-send-from").value ? `-i ${sh("@" + $("m-send-from").value.split("@")[1])} ` : ""}` +
    `${sh($("m-send-src").value)} > ${sh($("m-send-file").value)}`;
  const advCli = () => `cachalot mysql advise --socket ${sh($("m-adv-sock").value)}` + ($("m-adv-fs").value ? ` ${sh($("m-adv-fs").value)}` : "");
  function showClis() {
    $("m-send-cli").textContent = sendCli();
    $("m-adv-cli").textContent = advCli();
    $("m-my-take-cli").textContent = myTakeCli();
    $("m-my-clone-cli").textContent = myCloneCli();
    $("m-vol-cli").textContent = volCli();
    $("m-blk-cli").textContent = blkCli(true);
    $("m-pool-cli").textContent = poolCli();
    $("m-imp-cli").textContent = impCli();
    $("m-prop-cli").textContent = `${propSetCli()}  (Inherit: ${propInheritCli()})`;
    $("m-mysql-cli").textContent = mysqlCli();
    $("m-snap-cli").textContent = snapCli();
    $("m-clone-cli").textContent = cloneCli();
    $("m-nfs-cli").textContent = nfsCli();
    $("m-repl-cli").textContent = replCli();
    $("m-pair-cli").textContent = pairCli();
  }

  // ---- tables ----
  let snaps = [];
  let mySetsList = [];
  function options(sel, names) {
    const keep = sel.value;
    sel.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
    if (names.includes(keep)) sel.value = keep;
  }

  // A running scan's progress as `pool status` words it (the daemon computes
  // the rate and the time left).
  function scanText(sc) {
    if (sc && sc.kind === "scrub" && sc.state === "finished") {
      const n = sc.repaired || 0;
      return `scrub repaired ${n === 0 ? "0B" : n === 1 ? "1 block" : n + " blocks"} with ${sc.unrecoverable || 0} errors` +
        (sc.ended ? ` on ${new Date(sc.ended * 1000).toLocaleString()}` : "");
    }
    if (!sc || sc.state !== "scanning") return "";
    const pct = Math.min(100, (100 * sc.examined) / Math.max(1, sc.total)).toFixed(1);
    const hms = (t) => [Math.floor(t / 3600), Math.floor(t / 60) % 60, t % 60].map((n) => String(n).padStart(2, "0")).join(":");
    return `${sc.kind} in progress, ${pct}% done, ${size(sc.rate)}/s, ${hms(sc.eta_secs)} to go`;
  }

  // The pools table; while a pool scans (a resilver), it is read again every
  // 2 s, alone, so the other tables' fields are left as they are.
  let poolsTimer = null;
  async function refreshPools() {
    let pools = [];
    try { pools = await call("GET", "/pools"); } catch (e) { say(e.message, true); }
    const details = await Promise.all(pools.map((p) => call("GET", "/pools/" + enc(p.name)).catch(() => null)));
    $("m-pools").innerHTML = "<tr><th>NAME</th><th>HEALTH</th><th>SIZE</th><th>FREE</th><th>DEVICES (read/write/cksum errors)</th><th>SCAN</th><th></th></tr>" +
      pools.map((p, i) => {
        const devs = [];
        // A leaf device (a path) can be taken offline or brought back from its line.
        const devAct = (d) => (d.children && d.children.length) || !d.name.startsWith("/") ? "" :
          ` <button data-act="${d.state === "OFFLINE" ? "dev-online" : "dev-offline"}" data-pool="${esc(p.name)}" data-name="${esc(d.name)}">` +
          `${d.state === "OFFLINE" ? "Online" : "Offline…"}</button>`;
        const walk = (d, depth) => { devs.push("&nbsp;".repeat(depth * 2) + `${esc(d.name)} ${esc(d.state)} ${d.read}/${d.write}/${d.cksum}${devAct(d)}`); (d.children || []).forEach((c) => walk(c, depth + 1)); };
        ((details[i] && details[i].devices) || []).forEach((d) => walk(d, 0));
        return `<tr><td>${esc(p.name)}</td><td>${esc(p.health)}</td><td>${size(p.size)}</td><td>${size(p.free)}</td><td>${devs.join("<br>")}</td>` +
          `<td class="scan">${esc(scanText(details[i] && details[i].scrub))}</td>` +
          `<td><button data-act="scrub" data-name="${esc(p.name)}">Scrub</button> ` +
          `<button data-act="pool-clear" data-name="${esc(p.name)}" title="bring a suspended pool back (re-import from its last committed state)">Clear</button> ` +
          `<button data-act="export-pool" data-name="${esc(p.name)}">Export…</button> ` +
          `<button data-act="destroy-pool" data-name="${esc(p.name)}">Destroy…</button></td></tr>`;
      }).join("");
    options($("m-dev-pool"), pools.map((p) => p.name));
    const scanning = details.some((d) => d && d.scrub && d.scrub.state === "scanning");
    clearTimeout(poolsTimer);
    poolsTimer = scanning && !$("page-manage").hidden ? setTimeout(refreshPools, 2000) : null;
  }

  async function refresh() {
    await refreshPools();
    let dss = [], shares = [], repl = [], mounts = [], peers = [];
    try {
      dss = await call("GET", "/datasets?props=recordsize,sharenfs,origin");
      snaps = await call("GET", "/snapshots?props=creation,written");
      shares = await call("GET", "/shares");
      repl = await call("GET", "/replication");
      mySetsList = await call("GET", "/mysql/snapshots");
      mounts = await call("GET", "/mounts");
      peers = await call("GET", "/peers");
    } catch (e) { say(e.message, true); }
    $("m-peers").innerHTML = "<tr><th>KEY</th><th>ADDRESS</th><th>PAIRED</th></tr>" +
      peers.map((p) => `<tr data-peer="${esc(p.address || p.fingerprint)}"><td>${esc(p.fingerprint)}</td><td>${esc(p.address || "(dialled us)")}</td>` +
        `<td>${p.paired ? new Date(p.paired * 1000).toLocaleString() : "-"}</td></tr>`).join("");
    $("m-my-sets").innerHTML = "<tr><th>SNAPSHOT SET</th><th>MEMBERS</th><th>CREATED</th><th>GTID</th><th>BINLOG</th><th></th></tr>" +
      mySetsList.map((s) => `<tr data-myset="${esc(s.name)}"><td>${esc(s.name)}</td><td>${esc(s.members.join(", "))}</td>` +
        `<td>${s.created ? new Date(s.created * 1000).toLocaleString() : "-"}</td><td>${esc(s.gtid || "-")}</td>` +
        `<td>${s.binlog_file ? esc(s.binlog_file + ":" + s.binlog_pos) : "-"}</td>` +
        `<td><button data-act="my-restore" data-name="${esc(s.name)}">Restore…</button></td></tr>`).join("");
    options($("m-my-clone-src"), mySetsList.map((s) => s.name));
    $("m-shares").innerHTML = "<tr><th>NAME</th><th>PROTOCOL</th><th>PATH OR TARGET</th><th>CLIENTS</th><th>STATE</th><th></th></tr>" +
      shares.map((r) => `<tr data-share="${esc(r.name + " " + r.protocol)}"><td>${esc(r.name)}</td><td>${esc(r.protocol)}</td><td>${esc(r.path)}</td>` +
        `<td>${esc((Array.isArray(r.clients) ? r.clients.join(", ") : r.clients) || "-")}</td><td>${esc(r.state)}</td>` +
        `<td><button data-act="unshare" data-name="${esc(r.name)}" data-proto="${esc(r.protocol)}">Stop sharing…</button></td></tr>`).join("");
    const ago = (s) => (s === null || s === undefined ? "-" : s < 120 ? s + "s" : s < 7200 ? Math.round(s / 60) + "m" : Math.round(s / 3600) + "h");
    $("m-repl").innerHTML = "<tr><th>NAME</th><th>SOURCE</th><th>TARGET</th><th>STATE</th><th>LAG</th><th>LAST SYNC</th><th>LAST ERROR</th><th></th></tr>" +
      repl.map((r) => `<tr data-repl="${esc(r.name)}"><td>${esc(r.name)}</td><td>${esc(r.source)}</td><td>${esc(r.target)}</td><td>${esc(r.state)}</td>` +
        `<td>${ago(r.lag)}${r.lagging ? ' <b class="lagging" title="the recovery point is older than twice the schedule">late</b>' : ""}</td><td>${r.last_success ? new Date(r.last_success * 1000).toLocaleString() : "-"}</td><td>${esc(r.last_error || "-")}</td>` +
        `<td><button data-act="repl-run" data-name="${esc(r.name)}">Run now</button> ` +
        (r.state === "paused" ? `<button data-act="repl-resume" data-name="${esc(r.name)}">Resume</button>` : `<button data-act="repl-pause" data-name="${esc(r.name)}">Pause</button>`) +
        ` <button data-act="repl-break" data-name="${esc(r.name)}" data-target="${esc(r.target)}">Break…</button>` +
        ` <button data-act="repl-resync" data-name="${esc(r.name)}" data-target="${esc(r.target)}">Resync…</button>` +
        ` <input class="raddr" size="16" placeholder="this side's HOST:PORT" aria-label="reverse address of ${esc(r.name)}">` +
        ` <button data-act="repl-reverse" data-name="${esc(r.name)}" data-source="${esc(r.source)}" data-target="${esc(r.target)}">Reverse…</button>` +
        ` <button data-act="destroy-repl" data-name="${esc(r.name)}" data-source="${esc(r.source)}" data-target="${esc(r.target)}">Destroy…</button></td></tr>`).join("");
    const mountedAt = new Map(mounts.map((m) => [m.name, m.path]));
    // A filesystem's mount cell: where it is mounted with Unmount, or a path field
    // (empty: the dataset's mountpoint property) with Mount.
    const mountCell = (d) => {
      if (d.type !== "filesystem") return "-";
      const at = mountedAt.get(d.name);
      if (at !== undefined) return `${esc(at)} <button data-act="unmount" data-name="${esc(d.name)}">Unmount</button>`;
      return `<input class="mp" size="18" placeholder="/absolute/empty/dir" aria-label="mount point of ${esc(d.name)}"> ` +
        `<button data-act="mount" data-name="${esc(d.name)}">Mount</button>`;
    };
    $("m-datasets").innerHTML = "<tr><th>NAME</th><th>TYPE</th><th>USED</th><th>AVAIL</th><th>RECORDSIZE</th><th>NFS</th><th>MOUNTED AT</th><th></th></tr>" +
      dss.map((d) => `<tr data-ds="${esc(d.name)}"><td>${esc(d.name)}</td><td>${esc(d.type)}</td><td>${size(d.used)}</td><td>${size(d.available)}</td>` +
        `<td>${esc(d.props.recordsize.value)}</td><td>${esc(d.props.sharenfs.value)}</td><td>${mountCell(d)}</td>` +
        `<td>${d.props.origin.value !== "-" ? `<button data-act="promote" data-name="${esc(d.name)}" title="make ${esc(d.name)} independent of ${esc(d.props.origin.value)}">Promote</button> ` : ""}` +
        `${d.name.includes("/") ? `<button data-act="destroy-ds" data-name="${esc(d.name)}">Destroy…</button>` : ""}</td></tr>`).join("");
    $("m-snaps").innerHTML = "<tr><th>SNAPSHOT</th><th>USED</th><th>CREATED</th><th></th></tr>" +
      snaps.map((s) => `<tr data-snap="${esc(s.name)}"><td>${esc(s.name)}</td><td>${size(s.used)}</td>` +
        `<td>${new Date(Number(s.props.creation.raw) * 1000).toLocaleString()}</td>` +
        `<td><button data-act="diff" data-name="${esc(s.name)}">Diff…</button> ` +
        `<button data-act="holds" data-name="${esc(s.name)}">Holds…</button> ` +
        `<button data-act="rollback" data-name="${esc(s.name)}">Roll back…</button> ` +
        `<button data-act="destroy-snap" data-name="${esc(s.name)}">Destroy…</button></td></tr>`).join("");
    const fss = dss.filter((d) => d.type === "filesystem").map((d) => d.name);
    options($("m-snap-ds"), fss);
    options($("m-nfs-ds"), fss);
    options($("m-prop-ds"), dss.map((d) => d.name));
    options($("m-repl-src"), fss);
    options($("m-blk-vol"), dss.filter((d) => d.type === "volume").map((d) => d.name));
    options($("m-clone-src"), snaps.map((s) => s.name));
    options($("m-send-src"), snaps.map((s) => s.name));
    sendFromOptions();
    showClis();
  }

  // ---- actions ----
  async function rollback(name) {
    const [fs, snap] = name.split("@");
    const mine = snaps.filter((s) => s.name.startsWith(fs + "@"));
    const newer = mine.slice(mine.findIndex((s) => s.name === name) + 1);
    let written = "";
    try {
      const rows = await call("GET", `/datasets/${enc(fs)}?props=${enc("written@" + snap)}`);
      if (rows[0] && rows[0].value !== "-") written = ` (${rows[0].value} written since)`;
    } catch (e) { /* the list below still says what goes */ }
    const lines = [`every change to ${fs} since ${snap} is lost${written}`];
    for (const s of newer) lines.push(`snapshot ${s.name} is destroyed`);
    const cli = `cachalot rollback ${newer.length ? "-r " : ""}${sh(name)}`;
    confirmDialog(`Roll ${fs} back to ${snap}?`, lines, cli, "Roll back",
      () => act(cli, [() => call("POST", `/snapshots/${enc(name)}/rollback`, { recursive: newer.length > 0 })]));
  }

  // Snapshot diff: the panel compares a snapshot with its filesystem now or a
  // later snapshot of it, as `cachalot diff`.
  const diffCli = () => `cachalot diff ${sh($("m-diff-from").textContent)}` +
    ($("m-diff-to").value ? ` ${sh($("m-diff-to").value)}` : "");
  function openDiff(name) {
    const fs = name.split("@")[0];
    const mine = snaps.filter((s) => s.name.startsWith(fs + "@")).map((s) => s.name);
    const later = mine.slice(mine.indexOf(name) + 1);
    $("m-diff-from").textContent = name;
    $("m-diff-to").innerHTML = [`<option value="">${esc(fs)} (now)</option>`]
      .concat(later.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`)).join("");
    $("m-diff-rows").innerHTML = "";
    $("m-diff").hidden = false;
    showDiff();
  }
  async function showDiff() {
    const from = $("m-diff-from").textContent;
    const to = $("m-diff-to").value;
    $("m-diff-cli").textContent = diffCli();
    try {
      const v = await call("GET", `/snapshots/${enc(from)}/diff` + (to ? `?to=${enc(to)}` : ""));
      const label = { M: "modified", "+": "created", "-": "removed", R: "renamed" };
      $("m-diff-rows").innerHTML = "<tr><th>CHANGE</th><th>TYPE</th><th>PATH</th></tr>" +
        (v.changes.length ? v.changes.map((c) => `<tr><td title="${label[c.change]}">${esc(c.change)}</td><td>${esc(c.type)}</td>` +
          `<td>${esc(c.path)}${c.new_path ? " → " + esc(c.new_path) : ""}</td></tr>`).join("")
          : "<tr><td colspan=3>no changes</td></tr>");
    } catch (e) {
      say("Refused: " + e.message, true);
    }
  }

  // The older snapshots of the one to send, for an incremental stream.
  function sendFromOptions() {
    const src = $("m-send-src").value, fs = src.split("@")[0];
    const mine = snaps.filter((s) => s.name.startsWith(fs + "@")).map((s) => s.name);
    const older = mine.slice(0, Math.max(0, mine.indexOf(src)));
    const keep = $("m-send-from").value;
    $("m-send-from").innerHTML = ['<option value="">(full stream)</option>']
      .concat(older.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`)).join("");
    if (older.includes(keep)) $("m-send-from").value = keep;
  }

  // A send job into a new file, its progress from the job's events.
  function sendSnapshot() {
    const body = { file: $("m-send-file").value };
    if ($("m-send-from").value) body.from = $("m-send-from").value;
    const bar = $("m-send-progress"), step = $("m-send-step");
    act(sendCli(), [async () => {
      const job = await call("POST", `/snapshots/${enc($("m-send-src").value)}/send`, body);
      bar.hidden = false;
      await new Promise((resolve, reject) => {
        const es = new EventSource(`/api/v1/jobs/${job.id}/events`);
        es.addEventListener("progress", (e) => { bar.value = JSON.parse(e.data).progress || 0; });
        es.addEventListener("done", (e) => { es.close(); bar.value = 1; step.textContent = `done: ${size(JSON.parse(e.data).detail.bytes)} written`; resolve(); });
        es.addEventListener("failed", (e) => { es.close(); step.textContent = "failed"; reject(new Error(JSON.parse(e.data).error)); });
        es.addEventListener("gone", () => { es.close(); reject(new Error(`job ${job.id} is gone`)); });
      });
    }]);
  }

  // Device changes of the Devices box, each confirmed with its CLI command.
  function deviceAction(kind) {
    const pool = $("m-dev-pool").value, dev = $("m-dev-old").value.trim(), nu = $("m-dev-new").value.trim();
    const sz = $("m-dev-size").value.trim(), spec = $("m-dev-spec").value.split(/[\s,]+/).filter(Boolean);
    const base = `/pools/${enc(pool)}/devices/${enc(dev)}`;
    const plan = {
      replace: [`cachalot pool replace -s ${sh(sz)} ${sh(pool)} ${sh(dev)}${nu ? " " + sh(nu) : ""}`,
        [`${dev} is replaced by ${nu || "a new disk at its path"}, resilvered in the background`, `${dev} leaves pool ${pool} when the resilver ends`],
        () => call("POST", `/pools/${enc(pool)}/replace`, nu ? { old: dev, new: nu, size: sz } : { old: dev, size: sz })],
      attach: [`cachalot pool attach -s ${sh(sz)} ${sh(pool)} ${sh(dev)} ${sh(nu)}`,
        [`${nu} becomes a mirror of ${dev}, resilvered in the background`],
        () => call("POST", `${base}/attach`, { new: nu, size: sz })],
      detach: [`cachalot pool detach ${sh(pool)} ${sh(dev)}`,
        [`${dev} leaves its mirror in pool ${pool}: one copy fewer of its data (refused when it is the last)`],
        () => call("POST", `${base}/detach`)],
      remove: [`cachalot pool remove ${sh(pool)} ${sh(dev)}`,
        [`${dev} leaves pool ${pool} (a cache, log or spare device; refused for a data device)`],
        () => call("DELETE", base)],
      add: [`cachalot pool add -s ${sh(sz)} ${sh(pool)} ${spec.map(sh).join(" ")}`,
        [`${spec.join(" ")} is added to pool ${pool}`, "a data vdev cannot be removed again"],
        () => call("POST", `/pools/${enc(pool)}/devices`, { vdevs: spec, size: sz })],
    }[kind];
    confirmDialog(`${kind[0].toUpperCase() + kind.slice(1)} in pool ${pool}?`, plan[1], plan[0],
      kind[0].toUpperCase() + kind.slice(1), () => act(plan[0], [plan[2]]));
  }

  // my.cnf and dataset advice for a running server, as rows.
  async function advise() {
    const body = { socket: $("m-adv-sock").value };
    if ($("m-adv-fs").value) body.fs = $("m-adv-fs").value;
    let v = null;
    await act(advCli(), [async () => { v = await call("POST", "/mysql/advise", body); }]);
    if (!v) return;
    const rows = v.advice || [];
    $("m-adv-rows").innerHTML = `<tr><th colspan=3>${esc(v.version)}, datadir on ${esc(v.datadir_dataset)}</th></tr>` +
      "<tr><th>KIND</th><th>SETTING</th><th>WHY</th></tr>" +
      rows.map((r) => `<tr><td>${esc(r.kind)}</td><td>${esc(r.setting || "")}</td><td>${esc(r.reason || "")}</td></tr>`).join("");
  }

  // Restore a MySQL snapshot set: every member is rolled back; newer snapshots go too.
  function myRestore(name) {
    const set = mySetsList.find((s) => s.name === name);
    const snap = name.split("@")[1];
    const lines = ["the server using these datasets must be stopped first (restore is refused while anything uses them)"];
    let newer = [];
    for (const m of set.members) {
      lines.push(`every change to ${m} since ${snap} is lost`);
      const mine = snaps.filter((s) => s.name.startsWith(m + "@"));
      newer = newer.concat(mine.slice(mine.findIndex((s) => s.name === m + "@" + snap) + 1).map((s) => s.name));
    }
    for (const n of newer) lines.push(`snapshot ${n} is destroyed`);
    const cli = `cachalot mysql restore ${newer.length ? "-r " : ""}${sh(name)}`;
    confirmDialog(`Restore the MySQL snapshot set ${name}?`, lines, cli, "Restore",
      () => act(cli, [() => call("POST", "/mysql/restore", { snapshot: name, recursive: newer.length > 0 })]));
  }

  // Follow a job's server-sent events on the progress bar; resolves when it is done.
  function followJob(job) {
    const bar = $("m-my-progress"), step = $("m-my-step");
    bar.hidden = false;
    bar.value = job.progress || 0;
    return new Promise((resolve, reject) => {
      const es = new EventSource(`/api/v1/jobs/${job.id}/events`);
      const show = (j) => { bar.value = j.progress || 0; step.textContent = (j.detail && j.detail.step) || ""; };
      es.addEventListener("progress", (e) => show(JSON.parse(e.data)));
      es.addEventListener("done", (e) => {
        es.close();
        const j = JSON.parse(e.data);
        bar.value = 1;
        const srv = j.detail && j.detail.server;
        step.textContent = "done" + (srv ? `: replica server pid ${srv.pid}, socket ${srv.socket}` : "");
        resolve(j);
      });
      es.addEventListener("failed", (e) => { es.close(); const j = JSON.parse(e.data); step.textContent = "failed"; reject(new Error(j.error)); });
      es.addEventListener("gone", () => { es.close(); reject(new Error(`job ${job.id} is gone`)); });
    });
  }

  // The holds panel of a snapshot: its tags, each with Release, and Hold TAG.
  async function showHolds(snap) {
    $("m-holds-of").textContent = snap;
    $("m-holds").hidden = false;
    const v = await call("GET", `/snapshots/${enc(snap)}/holds`);
    $("m-holds-cli").textContent = `cachalot holds ${sh(snap)}`;
    $("m-holds-rows").innerHTML = "<tr><th>TAG</th><th></th></tr>" + (v.holds.length ? v.holds.map((t) =>
      `<tr data-hold="${esc(t)}"><td>${esc(t)}</td><td><button data-act="release" data-name="${esc(snap)}" data-tag="${esc(t)}">Release</button></td></tr>`).join("")
      : "<tr><td colspan=2>no holds</td></tr>");
  }

  // Replication break, resync and reverse (each confirmed), pool clear, share
  // stop and snapshot holds; true when B's action is one of these.
  function moreActions(b, name) {
    const d = b.dataset, path = `/replication/${enc(name)}`;
    if (d.act === "repl-break") {
      const cli = `cachalot replication break ${sh(name)}`;
      confirmDialog(`Break ${name} off?`, [`${d.target} is no longer updated and can be used on its own (a failover)`,
        `Resync rolls it back and resumes ${name}`], cli, "Break", () => act(cli, [() => call("POST", `${path}/break`)]));
    } else if (d.act === "repl-resync") {
      // Without force first: a refusal lists what the rollback would destroy, then asked again.
      const cli = `cachalot replication resync ${sh(name)}`;
      confirmDialog(`Resync ${name}?`, [`${d.target} is rolled back to the newest snapshot both sides have, and ${name} resumes`,
        "if that destroys snapshots or changes there, they are listed and asked for again"], cli, "Resync", async () => {
        try {
          await call("POST", `${path}/resync`, {});
          await refresh();
          say("Done. CLI: " + cli);
        } catch (e) {
          // Only a refusal that lists what would be destroyed is worth asking again.
          if (!/would destroy/.test(e.message)) { await refresh(); say("Refused: " + e.message, true); return; }
          const force = `cachalot replication resync -f ${sh(name)}`;
          confirmDialog(`Resync ${name} and lose this?`, [e.message], force, "Resync and destroy",
            () => act(force, [() => call("POST", `${path}/resync`, { force: true })]));
        }
      });
    } else if (d.act === "repl-reverse") {
      const addr = b.closest("tr").querySelector("input.raddr").value.trim();
      const cli = `cachalot replication reverse --address ${sh(addr)} ${sh(name)}`;
      confirmDialog(`Reverse ${name}?`, [`${d.target} becomes the source, sending to ${addr}/${d.source}`,
        `${name} leaves this appliance (the peer keeps it); refused if ${d.source} would lose snapshots or changes`], cli, "Reverse",
        () => act(cli, [() => call("POST", `${path}/reverse`, { address: addr })]));
    } else if (d.act === "pool-clear") {
      act(`cachalot pool clear ${sh(name)}`, [() => call("POST", `/pools/${enc(name)}/clear`)]);
    } else if (d.act === "unshare") {
      const cli = `cachalot set share${d.proto}=off ${sh(name)}`;
      confirmDialog(`Stop sharing ${name} over ${d.proto}?`, [`clients of ${name} over ${d.proto} are disconnected`], cli, "Stop sharing",
        () => act(cli, [() => call("DELETE", `/shares/${enc(d.proto)}/${enc(name)}`)]));
    } else if (d.act === "holds") {
      showHolds(name).catch((e) => say("Refused: " + e.message, true));
    } else if (d.act === "release") {
      act(`cachalot release ${sh(d.tag)} ${sh(name)}`, [() => call("DELETE", `/snapshots/${enc(name)}/holds/${enc(d.tag)}`), () => showHolds(name)]);
    } else {
      return false;
    }
    return true;
  }

  function onTableClick(e) {
    const b = e.target.closest("button[data-act]");
    if (!b) return;
    const name = b.dataset.name;
    if (b.dataset.act === "rollback") { rollback(name); return; }
    if (b.dataset.act === "diff") { openDiff(name); return; }
    if (moreActions(b, name)) return;
    if (b.dataset.act === "my-restore") { myRestore(name); return; }
    if (b.dataset.act === "mount") {
      const mp = b.closest("tr").querySelector("input.mp").value.trim();
      act(`cachalot mount ${sh(name)}${mp ? " " + sh(mp) : ""}`,
        [() => call("POST", `/datasets/${enc(name)}/mount`, mp ? { mountpoint: mp } : {})]);
      return;
    }
    if (b.dataset.act === "unmount") {
      act(`cachalot unmount ${sh(name)}`, [() => call("POST", `/datasets/${enc(name)}/unmount`, {})]);
      return;
    }
    if (b.dataset.act === "scrub") {
      // A job: the pools table shows its progress (read again while it scans).
      act(`cachalot pool scrub ${sh(name)}`, [() => call("POST", `/pools/${enc(name)}/scrub`)]);
      return;
    }
    if (b.dataset.act === "dev-online") {
      act(`cachalot pool online ${sh(b.dataset.pool)} ${sh(name)}`,
        [() => call("POST", `/pools/${enc(b.dataset.pool)}/devices/${enc(name)}/online`)]);
      return;
    }
    if (b.dataset.act === "dev-offline") {
      const cli = `cachalot pool offline ${sh(b.dataset.pool)} ${sh(name)}`;
      confirmDialog(`Take ${name} offline?`, [`no I/O goes to ${name} until it is brought online (kept across restarts)`,
        `pool ${b.dataset.pool} runs degraded meanwhile (refused when no other copy of its data is online)`], cli, "Take offline",
        () => act(cli, [() => call("POST", `/pools/${enc(b.dataset.pool)}/devices/${enc(name)}/offline`)]));
      return;
    }
    if (b.dataset.act === "promote") {
      act(`cachalot promote ${sh(name)}`, [() => call("POST", `/datasets/${enc(name)}/promote`)]);
      return;
    }
    for (const verb of ["run", "pause", "resume"]) {
      if (b.dataset.act === "repl-" + verb) {
        act(`cachalot replication ${verb} ${sh(name)}`, [() => call("POST", `/replication/${enc(name)}/${verb}`)]);
        return;
      }
    }
    if (b.dataset.act === "destroy-snap") {
      const cli = `cachalot destroy ${sh(name)}`;
      confirmDialog(`Destroy snapshot ${name}?`, [`snapshot ${name} is destroyed (its clones must go first)`], cli, "Destroy",
        () => act(cli, [() => call("DELETE", "/snapshots/" + enc(name))]));
    } else if (b.dataset.act === "destroy-ds") {
      const cli = `cachalot destroy ${sh(name)}`;
      confirmDialog(`Destroy dataset ${name}?`, [`dataset ${name} and all its data are destroyed`, "refused while it has children, snapshots with clones, or is in use"], cli, "Destroy",
        () => act(cli, [() => call("DELETE", "/datasets/" + enc(name))]));
    } else if (b.dataset.act === "destroy-repl") {
      const cli = `cachalot replication destroy ${sh(name)}`;
      confirmDialog(`Destroy replication ${name}?`, [`${b.dataset.source} is no longer sent to ${b.dataset.target}`,
        `the holds of ${name} on ${b.dataset.source}'s snapshots are released`, `the copy on ${b.dataset.target} stays`], cli, "Destroy",
        () => act(cli, [() => call("DELETE", "/replication/" + enc(name))]));
    } else if (b.dataset.act === "export-pool") {
      const cli = `cachalot pool export ${sh(name)}`;
      confirmDialog(`Export pool ${name}?`, [`every dataset of ${name} is unmounted and unshared (refused while one is in use)`,
        `the pool goes offline until it is imported again (Import an exported pool, below)`], cli, "Export",
        () => act(cli, [() => call("POST", `/pools/${enc(name)}/export`)]));
    } else if (b.dataset.act === "destroy-pool") {
      const cli = `cachalot pool destroy ${sh(name)}`;
      confirmDialog(`Destroy pool ${name}?`, [`pool ${name}, every dataset and snapshot in it are destroyed`], cli, "Destroy",
        () => act(cli, [() => call("DELETE", "/pools/" + enc(name))]));
    }
  }

  function useToken(t) {
    sessionStorage.setItem(KEY, t);
    $("m-token").value = t;
    $("m-token-state").textContent = t ? "token set for this tab" : "no token: read only";
  }

  // The first-run box shows while no API token exists on the appliance.
  async function checkFirstRun() {
    let s = { first_token: false };
    try { s = await call("GET", "/setup"); } catch (e) { /* an older daemon: no first run here */ }
    $("m-first").hidden = !s.first_token;
    if (s.first_token) $("m-first-file").textContent = s.setup_code_file;
  }

  function wire() {
    $("m-token").value = sessionStorage.getItem(KEY) || "";
    $("m-token-save").onclick = () => useToken($("m-token").value.trim());
    $("m-first-go").onclick = () => {
      const name = $("m-first-name").value.trim();
      act(`cachalot token create ${sh(name)}`, [async () => {
        const r = await call("POST", "/tokens/first", { code: $("m-first-code").value.trim(), name });
        useToken(r.token);
        $("m-first-code").value = "";
        $("m-token-state").textContent = `token '${r.name}' created and set for this tab`;
        $("m-token-new").value = r.token;
        $("m-token-new-box").hidden = false;
        await checkFirstRun();
      }]);
    };
    $("m-pair-make").onclick = () => act("cachalot replication pair", [async () => {
      const r = await call("POST", "/peers/token", {});
      $("m-pair-made").value = r.token;
      $("m-pair-key").textContent = `this appliance's key: ${r.fingerprint}`;
    }]);
    $("m-pair-go").onclick = () => act(pairCli(), [() => call("POST", "/peers", {
      address: $("m-pair-addr").value.trim(), token: $("m-pair-token").value.trim() })]);
    for (const id of ["m-pool-name", "m-pool-files", "m-pool-size", "m-imp-name", "m-imp-dir", "m-prop-ds", "m-prop-name", "m-prop-value", "m-mysql-parent", "m-snap-ds", "m-snap-name", "m-clone-src", "m-clone-target", "m-nfs-ds", "m-nfs-opts", "m-vol-name", "m-vol-size", "m-blk-vol", "m-blk-proto",
      "m-repl-name", "m-repl-src", "m-pair-addr", "m-repl-target", "m-repl-schedule", "m-repl-paused",
      "m-send-src", "m-send-from", "m-send-file", "m-adv-sock", "m-adv-fs",
      "m-my-sock", "m-my-ds", "m-my-snap", "m-my-clone-src", "m-my-clone-target", "m-my-clone-mp", "m-my-clone-of"]) {
      $(id).oninput = showClis;
      $(id).onchange = showClis;
    }
    $("m-pool-create").onclick = () => act(poolCli(), [() => call("POST", "/pools", {
      name: $("m-pool-name").value, vdevs: $("m-pool-files").value.split(/[\s,]+/).filter(Boolean), size: $("m-pool-size").value })]);
    $("m-imp-go").onclick = () => act(impCli(), [() => call("POST", `/pools/${enc($("m-imp-name").value)}/import`, {
      dirs: [$("m-imp-dir").value] })]);
    $("m-prop-set").onclick = () => act(propSetCli(), [() => call("PUT",
      `/datasets/${enc($("m-prop-ds").value)}/properties/${enc($("m-prop-name").value)}`, { value: $("m-prop-value").value })]);
    $("m-prop-inherit").onclick = () => act(propInheritCli(), [() => call("DELETE",
      `/datasets/${enc($("m-prop-ds").value)}/properties/${enc($("m-prop-name").value)}`)]);
    $("m-mysql-create").onclick = () => {
      const p = $("m-mysql-parent").value;
      act(mysqlCli(), [
        () => call("POST", "/datasets", { name: p, parents: true }),
        () => call("POST", "/datasets", { name: p + "/data", props: { recordsize: "16K" } }),
        () => call("POST", "/datasets", { name: p + "/log", props: { recordsize: "128K" } }),
      ]);
    };
    $("m-snap-take").onclick = () => act(snapCli(), [() => call("POST", "/snapshots", { names: [$("m-snap-ds").value + "@" + $("m-snap-name").value] })]);
    $("m-diff-go").onclick = showDiff;
    for (const k of ["replace", "attach", "detach", "remove", "add"]) $("m-dev-" + k).onclick = () => deviceAction(k);
    $("m-send-go").onclick = sendSnapshot;
    $("m-send-src").addEventListener("change", sendFromOptions);
    $("m-adv-go").onclick = advise;
    $("m-diff-to").addEventListener("change", () => { $("m-diff-cli").textContent = diffCli(); });
    $("m-clone-go").onclick = () => act(cloneCli(), [() => call("POST", `/snapshots/${enc($("m-clone-src").value)}/clone`, { target: $("m-clone-target").value })]);
    $("m-nfs-share").onclick = () => act(nfsCli(), [() => call("PUT", "/shares/nfs/" + enc($("m-nfs-ds").value), { options: $("m-nfs-opts").value })]);
    $("m-vol-create").onclick = () => act(volCli(), [() => call("POST", "/datasets", { name: $("m-vol-name").value, volume_size: $("m-vol-size").value })]);
    $("m-blk-share").onclick = () => act(blkCli(true), [() => call("PUT", `/shares/${$("m-blk-proto").value}/${enc($("m-blk-vol").value)}`)]);
    $("m-blk-unshare").onclick = () => {
      const cli = blkCli(false), vol = $("m-blk-vol").value, proto = $("m-blk-proto").value;
      confirmDialog(`Stop sharing ${vol} over ${proto}?`, [`clients connected to ${vol} over ${proto} are disconnected`], cli, "Stop sharing",
        () => act(cli, [() => call("DELETE", `/shares/${proto}/${enc(vol)}`)]));
    };
    $("m-repl-create").onclick = () => act(replCli(), [() => call("POST", "/replication", {
      name: $("m-repl-name").value, source: $("m-repl-src").value, target: $("m-repl-target").value,
      schedule: $("m-repl-schedule").value, paused: $("m-repl-paused").checked })]);
    $("m-my-take").onclick = () => act(myTakeCli(), [() => call("POST", "/mysql/snapshots", {
      socket: $("m-my-sock").value, datasets: mySets(), snapshot: $("m-my-snap").value })]);
    $("m-my-clone-go").onclick = () => {
      const body = { snapshot: $("m-my-clone-src").value, target: $("m-my-clone-target").value, replica_of: $("m-my-clone-of").value };
      if ($("m-my-clone-mp").value) body.mountpoint = $("m-my-clone-mp").value;
      act(myCloneCli(), [async () => followJob(await call("POST", "/mysql/clones", body))]);
    };
    $("m-my-sock").addEventListener("change", () => { if (!$("m-my-clone-of").value) { $("m-my-clone-of").value = $("m-my-sock").value; showClis(); } });
    $("m-confirm-cancel").onclick = () => { $("m-confirm").hidden = true; say("Cancelled: nothing changed."); };
    for (const t of ["m-pools", "m-datasets", "m-snaps", "m-repl", "m-my-sets", "m-shares", "m-holds-rows"]) $(t).onclick = onTableClick;
    $("m-hold-go").onclick = () => {
      const snap = $("m-holds-of").textContent, tag = $("m-hold-tag").value.trim();
      act(`cachalot hold ${sh(tag)} ${sh(snap)}`, [() => call("PUT", `/snapshots/${enc(snap)}/holds/${enc(tag)}`), () => showHolds(snap)]);
    };
  }

  function route() {
    if (location.hash.replace(/^#/, "").split("?")[0] !== "/manage") { $("page-manage").hidden = true; $("nav-manage").className = ""; return; }
    for (const id of ["page-overview", "page-detail", "page-analytics"]) $(id).hidden = true;
    $("page-manage").hidden = false;
    $("nav-manage").className = "on";
    checkFirstRun();
    refresh();
  }

  wire();
  window.addEventListener("hashchange", route);
  route();
})();
