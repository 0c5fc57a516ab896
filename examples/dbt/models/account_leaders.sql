-- Each account's three most viewed items, from the lake's analyst view top_items_per_account, with
-- the caption and posting time from items.
select
    t.platform,
    t.author_handle,
    t.rank_in_account,
    t.item_id,
    t.kind,
    t.views,
    t.likes,
    i.caption,
    i.posted_at,
    t.observed_at as views_observed_at
from {{ source('lake', 'top_items_per_account') }} as t
join {{ source('lake', 'items') }} as i using (platform, item_id)
where t.rank_in_account <= 3
