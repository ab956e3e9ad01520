// Shows a page's note that the browser refuses cookies (put after the waiting page's script,
// before the challenge's solver, in the countdown's script, by src/page). A page's status poll
// carries `page=1`; one that comes back without the visitor-id cookie the page set is answered
// `cookies_required` and joins nobody (src/proxy/status.rs): such a browser comes back as a new
// visitor with every request, and each poll would join the line again at its end. Its page says
// what is wrong and stops asking. A page of the operator's own may have no `#cookies-note`: one
// is added.
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
  // No place is kept: the page does not promise one (found by review).
  var k = document.getElementById("keep-tab");
  if (k) k.hidden = true;
}
