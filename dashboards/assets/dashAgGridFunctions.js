/* Functions the dashboard's tables name in their column definitions (dash-ag-grid looks them up
   here by name). Written in ES5: dash-ag-grid parses the calls it is given with a parser that
   knows no `??` or arrow functions. */
var dagfuncs = (window.dashAgGridFunctions = window.dashAgGridFunctions || {});

/* The cell's text as shown (formatted), for its tooltip. */
dagfuncs.cellTip = function (params) {
  if (params.valueFormatted !== null && params.valueFormatted !== undefined && params.valueFormatted !== "") {
    return params.valueFormatted;
  }
  return params.value === null || params.value === undefined ? "" : String(params.value);
};

/* A filter box's text against a number: ">100", ">=100", "<5", "<=5", "=100", "10..20" (both
   ends included), or a bare number, which keeps the values at or above it. Text that is none of
   these keeps every row (the box is being typed). */
dagfuncs.numberMatch = function (value, text) {
  var t = String(text === null || text === undefined ? "" : text).replace(/[\s,]/g, "");
  if (t === "") { return true; }
  var v = Number(value);
  if (value === null || value === undefined || value === "" || isNaN(v)) { return false; }
  var range = /^(-?[\d.]+(?:e-?\d+)?)\.\.(-?[\d.]+(?:e-?\d+)?)$/i.exec(t);
  if (range) { return v >= Number(range[1]) && v <= Number(range[2]); }
  var m = /^(>=|<=|>|<|=)?(-?[\d.]+(?:e-?\d+)?)%?$/i.exec(t);
  if (!m || isNaN(Number(m[2]))) { return true; }
  var x = Number(m[2]) / (t.charAt(t.length - 1) === "%" ? 100 : 1);
  switch (m[1]) {
    case ">": return v > x;
    case "<": return v < x;
    case "<=": return v <= x;
    case "=": return Math.abs(v - x) <= 1e-9 * Math.max(1, Math.abs(x));
    default: return v >= x;
  }
};

/* The text filter's matcher for a numeric column (the raw value, not its lower-cased text). */
dagfuncs.numberTextMatcher = function (params) {
  return dagfuncs.numberMatch(params.data ? params.data[params.colDef.field] : params.value, params.filterText);
};

/* Text with numbers in it ("0/_allgather_base/10") sorted as a person reads it: /2 before /10. */
dagfuncs.naturalCompare = function (a, b) {
  var sa = a === null || a === undefined ? "" : String(a);
  var sb = b === null || b === undefined ? "" : String(b);
  var re = /(\d+)|(\D+)/g;
  var pa = sa.match(re) || [], pb = sb.match(re) || [];
  for (var i = 0; i < Math.min(pa.length, pb.length); i++) {
    var x = pa[i], y = pb[i];
    var nx = /^\d+$/.test(x), ny = /^\d+$/.test(y);
    if (nx && ny) {
      var d = Number(x) - Number(y);
      if (d !== 0) { return d; }
    } else if (x !== y) {
      return x < y ? -1 : 1;
    }
  }
  return pa.length - pb.length;
};

/* Bytes in binary units, the value as short as it is exact (up to six significant digits), the
   rule of tpscope.numbers.size_text: 8388608 -> "8 MiB", 1536 -> "1.5 KiB". */
dagfuncs.formatBytes = function (value) {
  if (value === null || value === undefined || value === "") { return ""; }
  var v = Number(value), units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? String(v) + " B" : String(Number(v.toPrecision(6))) + " " + units[i];
};
