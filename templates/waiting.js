// The built-in waiting page's script (served as /.anteroom/waiting.js, see src/page/assets.rs).
// The server wraps it as `(function (T, room, url) { THIS COOKIES })(texts, room, status URL);`
// (COOKIES is templates/cookies.js): T is the
// room's words in the page's language, so one file serves every visitor of a room and language
// and is cached by the browser; the page itself carries only its figures.
"use strict";
  // This answer's figures, on the element that loaded this script (the page is answered per
  // request; this file is the same for every visitor of the room in one language, and cached).
  var me = document.currentScript, d0 = (me && me.dataset) || {};
  function figure(v) { var n = parseInt(v, 10); return isFinite(n) ? n : null; }
  var state = d0.state || "waiting";
  var pos = figure(d0.position) || 0;
  var pct = figure(d0.progress) || 0;
  var wait = figure(d0.retryMs);
  var refresh = figure(d0.refresh) || 5;
  var eta0 = figure(d0.eta);
  var eta_range = null;
  var key = "anteroom:" + room + ":first";
  var first = 0, eta = null, shown = null;
  // One poll at a time; `timer` is the next one, `last` when the latest started.
  var timer = null, busy = false, last = 0;
  // The browser did not keep our cookie: nothing more is asked (see cookies.js).
  var refused = false;

  function num(v) { return typeof v === "number" && isFinite(v) ? v : null; }
  function set(id, text) { var e = document.getElementById(id); if (e) e.textContent = text; }
  function reload() { location.replace(location.href.split("#")[0]); }
  function later(ms) {
    ms = num(ms);
    busy = false;
    clearTimeout(timer);
    timer = setTimeout(poll, ms !== null && ms > 0 ? Math.max(ms, 100) : 5000);
  }

  function remember(p) {
    if (!(p > 0)) return;
    if (!first) { try { first = parseInt(sessionStorage.getItem(key), 10) || 0; } catch (e) {} }
    if (p > first) { first = p; try { sessionStorage.setItem(key, String(p)); } catch (e) {} }
  }

  function bar(p) {
    // Progress since the first place seen in this tab; never below the server's estimate.
    var v = p > 0 && first > p ? Math.round((first - p) * 100 / first) : 0;
    v = Math.max(0, Math.min(100, Math.max(v, pct)));
    var e = document.getElementById("progress");
    if (!e) return;
    e.style.width = v + "%";
    e.setAttribute("aria-valuenow", String(v));
  }

  function smooth(s) {
    if (s === null) { eta = shown = null; return; }
    eta = eta === null ? s : 0.7 * eta + 0.3 * s;
    // Show decreases at once; ignore increases under 10% so the estimate does not jitter.
    if (shown === null || eta < shown || eta > shown * 1.1) shown = eta;
  }

  function fmt(s) {
    var n;
    if (s < 60) return T.eta_less_minute;
    if (s < 3600) { n = Math.round(s / 60); return n === 1 ? T.eta_minute : T.eta_minutes.replace("{n}", n); }
    n = Math.round(s / 3600);
    return n === 1 ? T.eta_hour : T.eta_hours.replace("{n}", n);
  }

  // A range in words, as the server words it (src/texts.rs, eta_range_text): in one unit,
  // rounded outwards.
  function fmtRange(lo, hi) {
    function words(key, unit) {
      var b = Math.max(2, Math.ceil(hi / unit)), a = Math.min(Math.max(1, Math.floor(lo / unit)), b - 1);
      return T[key].replace("{lo}", a).replace("{hi}", b);
    }
    return hi < 60 ? T.eta_less_minute : hi < 5400 ? words("eta_range_minutes", 60) : words("eta_range_hours", 3600);
  }

  function ranged(on) {
    var e = document.getElementById("eta-note");
    if (e) e.hidden = !on;
  }

  function update(d) {
    var p = num(d.position), w = num(d.waiting);
    if (p !== null && p > 0) {
      remember(p);
      set("position", String(p));
      if (state === "waiting") document.title = T.title_count.replace("{n}", p);
    } else {
      set("position", "\u2014");
    }
    if (w !== null) set("waiting", String(w));
    smooth(num(d.eta_seconds));
    var lo = num(d.eta_low_seconds), hi = num(d.eta_high_seconds);
    // A poor estimate comes as a range: shown as the server gives it, with the note that it is
    // an estimate; a good one as the smoothed number.
    eta_range = shown !== null && lo !== null && hi !== null ? [lo, hi] : null;
    set("eta", shown === null ? (d.held_by === "max-active" ? T.eta_held : T.eta_unknown)
      : eta_range ? fmtRange(lo, hi) : fmt(shown));
    // "Less than a minute" is no range: no note beside it (as the server renders the page).
    ranged(eta_range !== null && hi >= 60);
    bar(p);
  }

  function poll() {
    var r;
    if (busy || refused) return;
    clearTimeout(timer);
    busy = true;
    last = Date.now();
    try {
      // `page=1`: a poll from this page, which set the visitor-id cookie (see cookies.js).
      r = fetch(url + "&page=1", { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } });
    } catch (e) { later(wait); return; }
    r.then(function (res) {
      if (res.status === 200) return res.json();
      // Not an answer to show (429 limited, 503 full or busy): still the server's word on when
      // to ask again, in the JSON or in Retry-After (before, the page kept its last interval).
      var after = Number(res.headers.get("Retry-After"));
      if (after > 0) wait = after * 1000;
      return res.json().then(function (d) {
        if (d && num(d.retry_after_ms) !== null) wait = d.retry_after_ms;
        throw new Error("status " + res.status);
      });
    }).then(function (d) {
      if (!d || typeof d !== "object") throw new Error("bad reply");
      // The browser did not keep the cookie this page set: no more polls and no reloads,
      // each would join the line again at its end.
      if (d.state === "cookies_required") { refused = true; busy = false; anteroomSayCookiesRefused(T.cookies_required); return; }
      if (num(d.retry_after_ms) !== null) wait = d.retry_after_ms;
      // Admitted, or the line changed state: load the original URL again and let the server decide.
      if (d.state === "admitted" || d.state !== state) { reload(); return; }
      update(d);
      later(wait);
    })["catch"](function () { later(wait); });
  }

  remember(pos);
  smooth(num(eta0));
  bar(pos);
  if (typeof window.fetch !== "function") {
    setTimeout(reload, refresh * 1000);
  } else {
    later(wait);
    // A hidden tab's timers are throttled (Chrome: once a minute after five minutes hidden), so
    // its place may be near its end when it is shown again: poll at once, not at the next timer.
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible" && Date.now() - last >= 1000) poll();
    });
  }
