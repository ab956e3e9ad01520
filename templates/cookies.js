// Whether this browser keeps our cookies (put after the waiting page's, the countdown's and the
// challenge's scripts by src/page). A browser that refuses them comes back as a new visitor with
// every request: each status poll would join the line again at its end (a place nobody holds,
// which later takes a turn), spend its network's join-limit and, with a join challenge, solve
// puzzles for ever. Such a page says what is wrong and stops asking instead.
function anteroomCookiesRefused() {
  if (navigator.cookieEnabled === false) return true;
  try {
    var probe = "anteroom_probe=" + Math.random().toString(36).slice(2);
    document.cookie = probe + "; path=/; SameSite=Lax";
    var kept = document.cookie.indexOf(probe) >= 0;
    document.cookie = "anteroom_probe=; path=/; max-age=0; SameSite=Lax";
    return !kept;
  } catch (e) {
    // No say over cookies here (a sandboxed frame): not known to be refused.
    return false;
  }
}
// Shows the page's note on cookies (a page of the operator's own may have none: one is added).
function anteroomSayCookiesRefused(text) {
  var e = document.getElementById("cookies-note");
  if (!e) {
    e = document.createElement("p");
    e.id = "cookies-note";
    e.className = "note";
    e.textContent = text || "";
    (document.querySelector("main") || document.body).appendChild(e);
  }
  e.hidden = false;
  e.setAttribute("role", "alert");
}
