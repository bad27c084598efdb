// A client-side router in miniature: what a React/Vue/Svelte build does with
// a deep link. The server must answer every unknown path with index.html.
(function () {
  var routes = { "/": "home", "/settings/profile": "profile page" };
  var path = window.location.pathname;
  document.getElementById("app").textContent =
    "route " + path + ": " + (routes[path] || "not found in the app");
  document.title = "spa " + path;
})();
