import './base.css';
import './timeline.css';
import './insight.css';
import './optimize.css';
import './processes.css';
