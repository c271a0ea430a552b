// See ../README.md. galata's benchmark reporter calls these; nothing here uses that reporter.
const unused = name => () => {
  throw new Error(
    `@stdlib/stats/base.${name}: galata's benchmark reporter is not available in this ` +
      'repository (package.json overrides @stdlib/stats with ui-tests/stubs/stdlib-stats)'
  );
};
module.exports = {
  meanpw: unused('meanpw'),
  variancepn: unused('variancepn'),
  dists: { t: { quantile: unused('dists.t.quantile') } }
};
