import { Link } from '../router'

// AssetTabs are the pages under Policies and assets.
export function AssetTabs() {
  return (
    <nav aria-label="Policies and assets" className="tabs">
      <ul>
        <li><Link to="/policies" exact>Policies, assets and templates</Link></li>
        <li><Link to="/policies/credentials">Credentials</Link></li>
        <li><Link to="/policies/data-sources">Data sources</Link></li>
      </ul>
    </nav>
  )
}
