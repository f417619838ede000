// Draws every chart on the page: each <div data-figure="ID"> gets the plotly figure in
// the JSON <script id="ID">. plotly.js is served by predops itself (no CDN).
(function () {
  "use strict";
  function draw() {
    document.querySelectorAll("div[data-figure]").forEach(function (div) {
      var src = document.getElementById(div.getAttribute("data-figure"));
      if (!src) { return; }
      var fig = JSON.parse(src.textContent);
      window.Plotly.newPlot(div, fig.data, fig.layout, {
        responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"]
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
