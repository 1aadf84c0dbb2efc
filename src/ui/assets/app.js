// pgjobd dashboard: refreshes the page's content every data-refresh seconds while the tab
// is visible. Nothing else depends on it: every action is a plain form.
(function () {
  "use strict";
  var seconds = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (!(seconds > 0)) return;

  // A refresh must not wipe what the user is doing: a ticked checkbox or a field being typed in.
  function busy() {
    if (document.querySelector("main input[type=checkbox]:checked")) return true;
    var active = document.activeElement;
    return !!(active && active.closest && active.closest("main form"));
  }

  function refresh() {
    if (document.visibilityState !== "visible" || busy()) return;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        // A lost session or a moved page: let the browser follow it properly.
        if (response.redirected || !response.ok) {
          if (response.redirected) window.location.reload();
          return null;
        }
        return response.text();
      })
      .then(function (text) {
        if (text === null || busy()) return;
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        var current = document.getElementById("main");
        if (!fresh || !current) return;
        // The flash message was shown once; a refresh must not bring it back or keep it.
        var flash = fresh.querySelector("#flash");
        if (flash) flash.remove();
        current.replaceWith(document.importNode(fresh, true));
      })
      .catch(function () { /* offline for a moment: the next tick tries again */ });
  }

  window.setInterval(refresh, seconds * 1000);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") refresh();
  });
})();
