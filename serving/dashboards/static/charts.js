// Draws every chart on the page: each <div data-figure="ID"> gets the plotly figure in
// the JSON <script id="ID">. plotly.js is served by predops itself (no CDN).
(function () {
  "use strict";
  function draw() {
    document.querySelectorAll("div[data-figure]").forEach(function (div) {
      var src = document.getElementById(div.getAttribute("data-figure"));
      if (!src) { return; }
      var fig = JSON.parse(src.textContent);
      if (window.predopsView) { fig = window.predopsView.localizeFigure(fig); }  // view.js
      window.Plotly.newPlot(div, fig.data, fig.layout, {
        responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"]
      });
      // A figure with "link" in its layout's meta opens the point's customdata as a
      // query on this page (e.g. a heat-map cell -> ?rack=<rack>), keeping the others.
      var link = fig.layout && fig.layout.meta && fig.layout.meta.link;
      if (link) {
        div.on("plotly_click", function (ev) {
          var value = ev.points && ev.points[0] && ev.points[0].customdata;
          if (!value) { return; }
          var q = new URLSearchParams(window.location.search);
          q.set(link, value);
          window.location.search = q.toString();
        });
      }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
