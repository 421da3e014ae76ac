// Dates in the viewer's time zone: the server renders UTC into <time datetime=...>; this rewrites
// the text with the browser's locale and zone, on load and after every htmx swap.
(function () {
  const fmt = new Intl.DateTimeFormat(undefined, {dateStyle: "medium", timeStyle: "short"});
  function localise(root) {
    root.querySelectorAll("time[data-local]").forEach(function (el) {
      const d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d)) { el.textContent = fmt.format(d); el.title = d.toISOString(); el.removeAttribute("data-local"); }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:load", function (e) {
    localise(e.detail.elt.parentNode || document);
    // The first live episode replaces the "no episodes yet" empty state.
    const empty = document.getElementById("episodes-empty");
    if (empty && document.querySelector("#episodes > li")) empty.remove();
  });
  // An error answer from the server (4xx/5xx) becomes a visible message instead of silence.
  document.addEventListener("htmx:responseError", function (e) {
    const box = document.getElementById("messages");
    if (!box || e.detail.elt.id === "live-poller") return;
    const div = document.createElement("div");
    div.className = "msg msg-error"; div.setAttribute("role", "alert");
    div.textContent = "The request failed (" + e.detail.xhr.status + " " + e.detail.xhr.statusText + ").";
    box.replaceChildren(div);
  });
  document.addEventListener("htmx:sendError", function () {
    const box = document.getElementById("messages");
    if (box) box.innerHTML = '<div class="msg msg-error" role="alert">The server could not be reached.</div>';
  });
})();
