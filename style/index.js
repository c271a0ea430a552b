import './base.css';
import './timeline.css';
import './insight.css';
import './estimator.css';
import './widget.css';
import './optimize.css';
import './export.css';
import './processes.css';
