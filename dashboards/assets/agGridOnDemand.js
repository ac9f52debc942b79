/* AG Grid's Dash component (dash_ag_grid.min.js, 1.3 MB, 0.3-0.5 s to evaluate on a 2-core
   machine) is not put on the page with the other scripts: it is fetched once the charts on view
   have drawn (or after MAX_WAIT_MS), so the first view's findings and charts do not wait for it
   and the tables fill a moment after them. app.py takes the bundle off the page's script list;
   this stands in for `dash_ag_grid.AgGrid` until it has loaded, then draws the real component with
   the same props. Written in ES5, as the page's other assets. */
(function () {
  if (window.dash_ag_grid) { return; }  /* the bundle is on the page after all: nothing to do */
  var React = window.React;
  var real = null;
  var loading = null;

  /* once every chart on view has drawn what its callback sent (data, or a "not available"
     note), or after MAX_WAIT_MS */
  var MAX_WAIT_MS = 3000;
  function chartsDrawn() {
    var shown = Array.prototype.filter.call(document.querySelectorAll(".js-plotly-plot"),
      function (gd) { return gd.offsetParent !== null; });
    return shown.length > 0 && shown.every(function (gd) {
      return (gd.data && gd.data.length) || (gd.layout && gd.layout.annotations && gd.layout.annotations.length);
    });
  }
  function afterFirstCharts() {
    var t0 = Date.now();
    return new Promise(function (resolve) {
      (function check() {
        if (chartsDrawn() || Date.now() - t0 > MAX_WAIT_MS) { resolve(); } else { setTimeout(check, 100); }
      })();
    });
  }

  function load() {
    if (!loading) {
      loading = afterFirstCharts().then(function () { return new Promise(function (resolve, reject) {
        var config = JSON.parse(document.getElementById("_dash-config").textContent);
        var script = document.createElement("script");
        script.src = config.requests_pathname_prefix +
          "_dash-component-suites/dash_ag_grid/dash_ag_grid.min.js";
        script.onload = function () {
          real = window.dash_ag_grid;
          /* keep the stand-in registered: Dash looks the component up at every render, and a
             new type there would mount every table afresh */
          window.dash_ag_grid = stub;
          resolve(real);
        };
        script.onerror = reject;
        document.body.appendChild(script);
      }); });
    }
    return loading;
  }

  function AgGrid(props) {
    var state = React.useState(real);
    var loaded = state[0];
    var setLoaded = state[1];
    React.useEffect(function () {
      if (!loaded) { load().then(setLoaded); }
    }, []);
    if (loaded) { return React.createElement(loaded.AgGrid, props); }
    return React.createElement("div", {id: props.id, className: props.className, style: props.style});
  }

  var stub = {AgGrid: AgGrid};
  window.dash_ag_grid = stub;
})();
