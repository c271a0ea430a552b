// See README.md: the stand-in for what @jupyterlab/galata imports of @stdlib/stats.
module.exports = { base: require('./base') };
