/* Back or forward into a page the browser kept in its cache shows it as it was left, not as its
   URL says: read the URL again instead. */
window.addEventListener("pageshow", function (e) { if (e.persisted) { window.location.reload(); } });

/* The page's view in the URL: written after every change once the page has settled (one history
   entry per view, so back and forward step through views), read back by the server (views.py). */
window.dash_clientside = Object.assign({}, window.dash_clientside, {
  tpscope: {
    viewQuery: function (run, baseline, step, ranks, tab, zoom, sel) {
      var p = new URLSearchParams();
      p.set("run", run);
      if (baseline) { p.set("baseline", baseline); }
      p.set("step", String(step));
      if (ranks && ranks.length) { p.set("ranks", ranks.slice().sort(function (a, b) { return a - b; }).join(",")); }
      p.set("tab", tab || "overview");
      if (zoom && zoom.run === run && zoom.step === step && zoom.x) {
        p.set("zoom", zoom.x.map(function (v) { return String(Math.round(v * 1000) / 1000); }).join(","));
      }
      if (sel && sel.run === run && sel.step === step) { p.set("sel", sel.kind + ":" + sel.key); }
      return "?" + p.toString();
    },

    writeUrl: function (run, baseline, step, ranks, tab, zoom, sel, options) {
      var nu = window.dash_clientside.no_update;
      if (!run || step === null || step === undefined) { return nu; }
      var q = window.dash_clientside.tpscope.viewQuery(run, baseline, step, ranks, tab, zoom, sel);
      if (!window._tpscopeUrlWritten) {
        /* the first view: wait until the URL's own run and step are shown, so a link is not
           overwritten by the defaults the page starts with */
        var asked = new URLSearchParams(window.location.search);
        var known = (options || []).map(function (o) { return o.value; });
        if (asked.get("run") && known.indexOf(asked.get("run")) >= 0 &&
            (asked.get("run") !== run || (asked.get("step") && asked.get("step") !== String(step)))) {
          return nu;
        }
      }
      clearTimeout(window._tpscopeUrlTimer);
      var write = function () {
        if (document.querySelector('[data-dash-is-loading="true"]')) {
          window._tpscopeUrlTimer = setTimeout(write, 250);  /* still drawing: not a view yet */
          return;
        }
        if (window.location.search !== q) {
          if (window._tpscopeUrlWritten) { window.history.pushState(null, "", q); }
          else { window.history.replaceState(null, "", q); }
        }
        window._tpscopeUrlWritten = true;
      };
      window._tpscopeUrlTimer = setTimeout(write, 400);
      return q;
    },

    /* A zoom of the Timeline (drag, scroll, a reset) as the zoom store; anything else (the
       toolbar's Pan or Zoom button, an autosize) changes nothing, so a redraw in flight is kept. */
    zoomFromRelayout: function (relayout, run, step) {
      var nu = window.dash_clientside.no_update;
      if (!relayout) { return nu; }
      if (relayout["xaxis.autorange"]) { return null; }
      var lo = relayout["xaxis.range[0]"], hi = relayout["xaxis.range[1]"];
      if (lo === undefined && Array.isArray(relayout["xaxis.range"])) {
        lo = relayout["xaxis.range"][0];
        hi = relayout["xaxis.range"][1];
      }
      if (lo === undefined || hi === undefined) { return nu; }
      return {run: run, step: step, x: [Number(lo), Number(hi)]};
    }
  }
});
