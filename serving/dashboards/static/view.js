// Every page: times in the viewer's zone (text, titles, charts, the custom range), the page's own refresh, anchors into closed
// <details>. The server writes times as <time datetime="...Z">... UTC</time>; here each
// becomes "YYYY-MM-DD HH:MM (UTC+hh:mm)" in this browser's zone (the UTC text stays in
// its title). Charts' time axes are moved to the same zone by localizeFigure, which
// charts.js calls before drawing. The refresh interval comes from the page
// (data-refresh on #viewbar, ?refresh= in the URL); reloading keeps the URL, so its
// filters and range stay; a pause holds for this tab (sessionStorage).
(function () {
  "use strict";
  var PAUSED = "predops.refresh.paused";
  var DATE = /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$/;

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function offset(d) {
    var m = -d.getTimezoneOffset(), sign = m >= 0 ? "+" : "-";
    m = Math.abs(m);
    return "UTC" + sign + pad(Math.floor(m / 60)) + ":" + pad(m % 60);
  }
  function wall(d, seconds) {
    var s = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes());
    return seconds ? s + ":" + pad(d.getSeconds()) : s;
  }
  // A plotly time as a Date: plotly's strings carry no zone, and ours are UTC.
  function utc(value) {
    if (typeof value !== "string" || !DATE.test(value)) { return null; }
    var iso = value.replace(" ", "T");
    var d = new Date(/(Z|[+-]\d{2}:\d{2})$/.test(iso) ? iso : iso + "Z");
    return isNaN(d.getTime()) ? null : d;
  }
  function local(value) {
    var d = utc(value);
    return d ? wall(d, true) : value;
  }

  function localizeTimes(root) {
    (root || document).querySelectorAll("time[datetime]").forEach(function (t) {
      if (t.dataset.local) { return; }
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) { return; }
      t.title = t.textContent;
      t.textContent = wall(d, false) + " (" + offset(d) + ")";
      t.dataset.local = "1";
    });
  }

  // Title attributes (hover text) that name a UTC time ("2026-05-01 08:00 UTC", as the
  // server writes them where markup cannot go) name it in this zone too.
  var TITLE_UTC = /(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC/g;
  function localizeTitles(root) {
    (root || document).querySelectorAll("[title]").forEach(function (el) {
      if (el.tagName === "TIME" || el.dataset.localTitle) { return; }
      var title = el.getAttribute("title");
      if (!TITLE_UTC.test(title)) { return; }
      TITLE_UTC.lastIndex = 0;
      el.setAttribute("title", title.replace(TITLE_UTC, function (m, t) {
        var d = utc(t);
        return d ? wall(d, false) + " (" + offset(d) + ")" : m;
      }));
      el.dataset.localTitle = "1";
    });
  }

  // The custom time range's inputs: the server fills them in UTC; here they show and
  // take this zone's wall clock, and are sent back as UTC ("...Z") on submit.
  function localizeRange() {
    var form = document.getElementById("range-picker");
    if (!form) { return; }
    var inputs = form.querySelectorAll("input[data-utc]");
    inputs.forEach(function (i) {
      var d = utc(i.value);
      if (d) { i.value = wall(d, false).replace(" ", "T"); }
    });
    var zone = form.querySelector(".range-zone");
    if (zone) { zone.textContent = "(your zone, " + offset(new Date()) + ")"; }
    form.addEventListener("submit", function () {
      inputs.forEach(function (i) {
        var d = i.value ? new Date(i.value) : null;  // no offset: this zone's wall clock
        if (!d || isNaN(d.getTime())) { return; }
        i.type = "hidden";
        i.value = d.toISOString().slice(0, 16) + "Z";
      });
    });
  }

  // Moves every time x value of a figure (traces, shapes, annotations) to this
  // browser's wall clock and says the zone in the chart's title.
  function localizeFigure(fig) {
    var layout = fig.layout = fig.layout || {}, any = false, zone = offset(new Date());
    (fig.data || []).forEach(function (t) {
      if (!t.x || !t.x.length) { return; }
      var first = t.x.find(function (v) { return v !== null && v !== undefined; });
      if (!utc(first)) { return; }
      t.x = t.x.map(function (v) { return v === null ? v : local(v); });
      any = true;
    });
    if (!any) { return fig; }
    (layout.shapes || []).forEach(function (s) {
      if (s.xref && s.xref !== "x" && s.xref.charAt(0) !== "x") { return; }
      if (utc(s.x0)) { s.x0 = local(s.x0); }
      if (utc(s.x1)) { s.x1 = local(s.x1); }
    });
    (layout.annotations || []).forEach(function (a) { if (utc(a.x)) { a.x = local(a.x); } });
    // The zone goes in the chart's title (an axis title would sit on a bottom legend).
    var title = layout.title = layout.title || {};
    title.text = (title.text ? title.text + " · " : "") + "times in your zone (" + zone + ")";
    layout.meta = Object.assign({}, layout.meta, { zone: zone });
    return fig;
  }

  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (!el) { return; }
    for (var p = el.parentElement; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") { p.open = true; }
    }
    el.classList.add("target");
    el.scrollIntoView({ block: "center" });
  }

  function refresh() {
    var bar = document.getElementById("viewbar");
    if (!bar) { return; }
    var every = parseInt(bar.getAttribute("data-refresh") || "0", 10);
    var button = document.getElementById("refresh-pause");
    var status = document.getElementById("refresh-status");
    var timer = null, left = every;
    function paused() { return window.sessionStorage.getItem(PAUSED) === "1"; }
    function tick() {
      left -= 1;
      if (left <= 0) { window.location.reload(); return; }
      status.textContent = "refreshes in " + left + " s";
    }
    function show() {
      if (timer) { window.clearInterval(timer); timer = null; }
      if (!every) { status.textContent = "refresh off"; button.hidden = true; return; }
      if (paused()) {
        status.textContent = "refresh paused";
        button.textContent = "Resume";
        return;
      }
      button.textContent = "Pause";
      left = every;
      status.textContent = "refreshes in " + left + " s";
      timer = window.setInterval(tick, 1000);
    }
    button.addEventListener("click", function () {
      if (paused()) { window.sessionStorage.removeItem(PAUSED); } else { window.sessionStorage.setItem(PAUSED, "1"); }
      show();
    });
    show();
  }

  window.predopsView = { localizeFigure: localizeFigure, localizeTimes: localizeTimes };
  function start() { localizeTimes(); localizeTitles(); localizeRange(); openTarget(); refresh(); }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
