// The join challenge's solver (src/edge/challenge.rs): finds a counter c such that
// SHA-256(nonce ‖ c in decimal) starts with `difficulty` zero bits, in slices so the page stays
// responsive, then sends it with the first status poll (which joins the line) and reloads.
// One SHA-256 block per try, in plain JavaScript: far faster than WebCrypto's async digest.
(function () {
  "use strict";
  var s = document.currentScript;
  var puzzle = s.getAttribute("data-challenge") || "";
  var bits = +s.getAttribute("data-difficulty");
  var url = s.getAttribute("data-status");
  var dot = puzzle.indexOf(".");
  var bucket = puzzle.slice(0, dot), nonce = puzzle.slice(dot + 1);
  var K = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
  ];
  var W = new Int32Array(64), B = new Uint8Array(64), i;
  for (i = 0; i < nonce.length; i++) B[i] = nonce.charCodeAt(i);
  function zeros(c) {
    var str = String(c), n = nonce.length + str.length, j;
    for (j = 0; j < str.length; j++) B[nonce.length + j] = str.charCodeAt(j);
    B[n] = 0x80;
    for (j = n + 1; j < 62; j++) B[j] = 0;
    B[62] = (n * 8) >>> 8; B[63] = (n * 8) & 255;
    for (j = 0; j < 16; j++) W[j] = (B[4 * j] << 24) | (B[4 * j + 1] << 16) | (B[4 * j + 2] << 8) | B[4 * j + 3];
    for (j = 16; j < 64; j++) {
      var x = W[j - 15], y = W[j - 2];
      W[j] = (W[j - 16] + (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) + W[j - 7] +
        (((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10))) | 0;
    }
    var a = 0x6a09e667 | 0, b = 0xbb67ae85 | 0, c2 = 0x3c6ef372 | 0, d = 0xa54ff53a | 0,
      e = 0x510e527f | 0, f = 0x9b05688c | 0, g = 0x1f83d9ab | 0, h = 0x5be0cd19 | 0;
    for (j = 0; j < 64; j++) {
      var t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) +
        ((e & f) ^ (~e & g)) + K[j] + W[j]) | 0;
      var t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
        ((a & b) ^ (a & c2) ^ (b & c2))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c2; c2 = b; b = a; a = (t1 + t2) | 0;
    }
    var z = Math.clz32((0x6a09e667 + a) | 0);
    return z < 32 ? z : 32 + Math.clz32((0xbb67ae85 + b) | 0);
  }
  var root = document.documentElement, c = 0, t0 = performance.now();
  function done() {
    root.setAttribute("data-solve-ms", String(Math.round(performance.now() - t0)));
    root.setAttribute("data-solve-tries", String(c + 1));
    if (s.hasAttribute("data-measure")) return;
    var back = function () { location.replace(location.href.split("#")[0]); };
    // A browser that refuses cookies would join as someone new, be asked again after the
    // reload, and solve for ever: the poll (`page=1`) is told so, and the page says why
    // (templates/cookies.js, put before this script).
    fetch(url + "&pow=" + bucket + "." + c + "&page=1", { headers: { accept: "application/json" }, credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (d) {
        if (d && d.state === "cookies_required") anteroomSayCookiesRefused();
        else back();
      }, back);
  }
  function run() {
    for (var end = c + 25000; c < end; c++) {
      if (zeros(c) >= bits) return done();
    }
    setTimeout(run, 0);
  }
  if (dot > 0 && bits > 0) run();
})();
