// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * virtio_balloon_sg - the SG lab's virtio balloon driver (out of tree, for
 * Linux 6.1 and 6.12).
 *
 * A stand-in for drivers/virtio/virtio_balloon.c (Rusty Russell et al.) that
 * keeps the stock driver's behaviour - PFN arrays of up to 256 PFNs per
 * request, the stats queue, deflate-on-OOM, balloon page compaction, the
 * num_pages/actual config protocol - and adds VIRTIO_BALLOON_F_SG (bit 6),
 * specified in lab/PROTOCOL.md:
 *
 *   When SG is negotiated, every element put on the inflate or deflate queue
 *   is a list of device-writable descriptors (virtqueue_add_inbuf), each one
 *   describing one physically contiguous guest range (address = guest
 *   physical address of the first page, length = multiple of 4096).  The
 *   device handles each range whole and returns the element (used len 0;
 *   any other used length: the device did not handle it).
 *
 * With SG the driver inflates by allocating higher-order blocks while memory
 * allows (order sg_max_order down to 0, without reclaim), sorts and merges
 * the blocks into runs of contiguous pages, and reports each run as ONE
 * descriptor.  With sg_chunk=1 (the default) a block of order > 0 stays one
 * allocation: it is tracked once, on a list per order, and freed whole on
 * deflate; a deflate of part of a block splits it onto the balloon's page
 * list.  Order-0 pages go on that list as in the stock driver (movable:
 * balloon compaction migrates them); chunked blocks are not movable.  With
 * sg_chunk=0 every block is split into pages on the balloon's page list
 * (the driver before chunking, kept to compare against).  Runs
 * are batched: as many descriptors per element as the queue takes (indirect
 * descriptors when offered), as many elements as there are free ring slots,
 * one kick, then the driver waits until the device has returned EVERY
 * element of the batch.  Used buffers left from an earlier batch are reaped
 * before anything new is added.  Any add error, any element the device
 * returns as not handled, and any element not returned within sg_timeout_ms
 * ends the call: ranges from the first such element on are not reported,
 * and their pages go back to the page allocator (inflate) or stay in the
 * balloon (deflate) - except the ranges of an element the device never
 * returned, which it may still own: on inflate they stay in the balloon.
 *
 * Built against 6.12 (6.11 and later) it finds its queues with struct
 * virtqueue_info, and it sends the six statistics 6.12's stock driver added
 * (tags 10-15: OOM kills, allocation stalls, kswapd and direct scans and
 * reclaims) when the headers define them.
 *
 * Left out to keep the module small: free page hinting
 * (VIRTIO_BALLOON_F_FREE_PAGE_HINT), page poisoning (F_PAGE_POISON) and free
 * page reporting (F_REPORTING).  They are not offered, so QEMU does not
 * enable them even when configured.
 */

#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <uapi/linux/virtio_ring.h>
#include <linux/virtio_balloon.h>
#include <linux/swap.h>
#include <linux/workqueue.h>
#include <linux/delay.h>
#include <linux/slab.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/balloon_compaction.h>
#include <linux/oom.h>
#include <linux/wait.h>
#include <linux/mm.h>
#include <linux/gfp.h>
#include <linux/scatterlist.h>
#include <linux/sort.h>
#include <linux/list_sort.h>
#include <linux/sched.h>
#include <linux/vmstat.h>
#include <linux/version.h>

#ifndef VIRTIO_BALLOON_F_SG
#define VIRTIO_BALLOON_F_SG		6 /* lab: ranges as SG lists */
#endif

/*
 * The balloon works in 4 KiB units; a guest page is
 * VIRTIO_BALLOON_PAGES_PER_PAGE of them.  All counters in balloon units.
 */
#define VIRTIO_BALLOON_PAGES_PER_PAGE \
	(unsigned int)(PAGE_SIZE >> VIRTIO_BALLOON_PFN_SHIFT)
#define VIRTIO_BALLOON_ARRAY_PFNS_MAX	256
/* Maximum number of (4k) pages to deflate on OOM notifications. */
#define VIRTIO_BALLOON_OOM_NR_PAGES	256
#define VIRTIO_BALLOON_OOM_NOTIFY_PRIORITY 80

/* SG path limits. */
#define SG_BATCH_PAGES		65536U	/* guest pages per fill/leak call */
#define SG_RANGES_MAX		8192U	/* ranges per fill/leak call */
#define SG_RANGE_MAX_PAGES	(1UL << (30 - PAGE_SHIFT)) /* 1 GiB per descriptor */
#define SG_ELEM_MAX_INDIRECT	256U	/* descriptors per element (indirect) */
#define SG_ELEM_MAX_DIRECT	32U	/* descriptors per element (no indirect) */
/*
 * Page orders 0 .. SG_NR_ORDERS - 1. Up to 6.3 MAX_ORDER was one past the
 * largest order (11); 6.4 made it the largest order (10), 6.8 renamed it
 * MAX_PAGE_ORDER.
 */
#if defined(MAX_PAGE_ORDER)
#define SG_NR_ORDERS		(MAX_PAGE_ORDER + 1)
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
#define SG_NR_ORDERS		(MAX_ORDER + 1)
#else
#define SG_NR_ORDERS		MAX_ORDER
#endif
#define SG_DEQUEUE_SLICE	4096UL	/* pages per balloon_page_list_dequeue() */
#define SG_DEFAULT_ORDER	9U	/* 2 MiB blocks with 4 KiB pages */

static bool sg = true;
module_param(sg, bool, 0444);
MODULE_PARM_DESC(sg, "Offer VIRTIO_BALLOON_F_SG (default 1)");

static unsigned int sg_max_order = SG_DEFAULT_ORDER;
module_param(sg_max_order, uint, 0444);
MODULE_PARM_DESC(sg_max_order,
		 "Highest allocation order tried when inflating with SG (default 9, capped at the largest page order)");

static unsigned int sg_timeout_ms = 30000;
module_param(sg_timeout_ms, uint, 0444);
MODULE_PARM_DESC(sg_timeout_ms,
		 "With SG, how long to wait for the device to return a batch before abandoning the elements still out (default 30000; 0 = forever)");

static bool sg_count_held;
module_param(sg_count_held, bool, 0644);
MODULE_PARM_DESC(sg_count_held,
		 "sg_stats counts the pages on the balloon's list (a walk under its lock; default 0)");

static bool sg_chunk = true;
module_param(sg_chunk, bool, 0444);
MODULE_PARM_DESC(sg_chunk,
		 "With SG, keep each block of order > 0 whole: tracked once, sent as one range, freed whole on deflate (default 1; 0: split into pages on the balloon list)");

static unsigned int sg_elem_max;
module_param(sg_elem_max, uint, 0444);
MODULE_PARM_DESC(sg_elem_max,
		 "Descriptors per queue element with SG (0 = auto: 256 with indirect descriptors, else 32; capped at the ring size)");

enum virtio_balloon_vq {
	VIRTIO_BALLOON_VQ_INFLATE,
	VIRTIO_BALLOON_VQ_DEFLATE,
	VIRTIO_BALLOON_VQ_STATS,
	VIRTIO_BALLOON_VQ_MAX
};

struct sg_range {
	unsigned long pfn;	/* first guest page frame */
	unsigned long npages;	/* guest pages */
};

/*
 * A block taken for the balloon: 1 << order guest pages from pfn, one
 * allocation.  unreported: its range was not taken by the device.
 */
struct sg_block {
	unsigned long pfn;
	unsigned int order;
	bool unreported;
};

/* Counters shown in /sys/bus/virtio/devices/virtioN/sg_stats. */
struct sg_counters {
	u64 calls;		/* fill_balloon_sg / leak_balloon_sg calls */
	u64 pages;		/* guest pages reported */
	u64 ranges;		/* descriptors (ranges) reported */
	u64 elems;		/* queue elements */
	u64 kicks;		/* batches (kick + wait for all) */
	u64 errors;		/* add failures (batch ended early) */
	u64 unreported;		/* pages given back / kept after an error */
	u64 max_range;		/* largest range, pages */
	u64 failed;		/* elements returned as not handled */
	u64 abandoned;		/* elements not returned in sg_timeout_ms */
	u64 stale;		/* used buffers of earlier calls reaped */
	u64 alloc_ns;		/* allocating the pages (inflate) */
	u64 build_ns;		/* PFN arrays / sorted runs, balloon list */
	u64 send_ns;		/* adding, kicking, waiting for the device */
};

struct virtio_balloon {
	struct virtio_device *vdev;
	struct virtqueue *inflate_vq, *deflate_vq, *stats_vq;

	/* The balloon servicing is delegated to a freezable workqueue. */
	struct work_struct update_balloon_stats_work;
	struct work_struct update_balloon_size_work;

	/* Prevent updating balloon when it is being canceled. */
	spinlock_t stop_update_lock;
	bool stop_update;

	/* Waiting for host to ack the pages we released. */
	wait_queue_head_t acked;

	/* Number of balloon pages we've told the Host we're not using. */
	unsigned int num_pages;
	/* The pages we've told the Host about, one guest page per entry. */
	struct balloon_dev_info vb_dev_info;

	/* Synchronize access/update to this struct virtio_balloon elements */
	struct mutex balloon_lock;

	/* PFN path: the array of pfns we tell the Host about. */
	unsigned int num_pfns;
	__virtio32 pfns[VIRTIO_BALLOON_ARRAY_PFNS_MAX];

	/* Memory statistics */
	struct virtio_balloon_stat stats[VIRTIO_BALLOON_S_NR];

	/* OOM notifier to deflate on OOM - VIRTIO_BALLOON_F_DEFLATE_ON_OOM */
	struct notifier_block oom_nb;

	/* SG path (VIRTIO_BALLOON_F_SG negotiated) */
	bool use_sg;
	unsigned int elem_max;		/* descriptors per element */
	unsigned int max_order;		/* highest order tried on inflate */
	struct scatterlist *sgl;	/* elem_max entries; balloon_lock */
	struct sg_range *fill_ranges;	/* SG_RANGES_MAX; size work only */
	struct sg_range *leak_ranges;	/* SG_RANGES_MAX; balloon_lock */
	struct sg_block *fill_blocks;	/* SG_RANGES_MAX; size work only */
	struct sg_block *leak_blocks;	/* SG_RANGES_MAX; balloon_lock */
	/* Chunked blocks (sg_chunk): off the balloon list; balloon_lock. */
	bool chunk;
	struct list_head blocks[SG_NR_ORDERS];	/* [0] unused */
	unsigned long nr_blocks[SG_NR_ORDERS];
	unsigned long block_pages;	/* guest pages in blocks */
	u64 block_splits;		/* blocks split by a partial deflate */
	struct sg_counters inflate_stats, deflate_stats;
	unsigned int sg_gen;		/* sg_tell_host() call, in the tokens */
	/* First range of each element in flight / abandoned this call. */
	DECLARE_BITMAP(sg_out, SG_RANGES_MAX);
	DECLARE_BITMAP(sg_lost, SG_RANGES_MAX);
	u64 order_allocs[SG_NR_ORDERS];	/* successful inflate allocations */
	u64 order_fails[SG_NR_ORDERS];	/* failed ones (order > 0: fall back) */
};

static const struct virtio_device_id id_table[] = {
	{ VIRTIO_ID_BALLOON, VIRTIO_DEV_ANY_ID },
	{ 0 },
};

static u32 page_to_balloon_pfn(struct page *page)
{
	unsigned long pfn = page_to_pfn(page);

	BUILD_BUG_ON(PAGE_SHIFT < VIRTIO_BALLOON_PFN_SHIFT);
	/* Convert pfn from Linux page size to balloon page size. */
	return pfn * VIRTIO_BALLOON_PAGES_PER_PAGE;
}

static void balloon_ack(struct virtqueue *vq)
{
	struct virtio_balloon *vb = vq->vdev->priv;

	wake_up(&vb->acked);
}

/* ------------------------------------------------------------------------
 * PFN path (VIRTIO_BALLOON_F_SG not negotiated): as the stock driver.
 * ------------------------------------------------------------------------ */

static void tell_host(struct virtio_balloon *vb, struct virtqueue *vq)
{
	struct scatterlist sg;
	unsigned int len;

	sg_init_one(&sg, vb->pfns, sizeof(vb->pfns[0]) * vb->num_pfns);

	/* We should always be able to add one buffer to an empty queue. */
	virtqueue_add_outbuf(vq, &sg, 1, vb, GFP_KERNEL);
	virtqueue_kick(vq);

	/* When host has read buffer, this completes via balloon_ack */
	wait_event(vb->acked, virtqueue_get_buf(vq, &len));
}

static void set_page_pfns(struct virtio_balloon *vb,
			  __virtio32 pfns[], struct page *page)
{
	unsigned int i;

	BUILD_BUG_ON(VIRTIO_BALLOON_PAGES_PER_PAGE > VIRTIO_BALLOON_ARRAY_PFNS_MAX);

	/* Set balloon pfns pointing at this page (first one at its start). */
	for (i = 0; i < VIRTIO_BALLOON_PAGES_PER_PAGE; i++)
		pfns[i] = cpu_to_virtio32(vb->vdev,
					  page_to_balloon_pfn(page) + i);
}

static unsigned int fill_balloon_pfn(struct virtio_balloon *vb, size_t num)
{
	struct sg_counters *st = &vb->inflate_stats;
	unsigned int num_allocated_pages;
	unsigned int num_pfns;
	struct page *page;
	LIST_HEAD(pages);
	u64 t0 = ktime_get_ns(), t1, t2;

	/* We can only do one array worth at a time. */
	num = min(num, ARRAY_SIZE(vb->pfns));

	for (num_pfns = 0; num_pfns < num;
	     num_pfns += VIRTIO_BALLOON_PAGES_PER_PAGE) {
		page = balloon_page_alloc();
		if (!page) {
			dev_info_ratelimited(&vb->vdev->dev,
					     "Out of puff! Can't get %u pages\n",
					     VIRTIO_BALLOON_PAGES_PER_PAGE);
			/* Sleep for at least 1/5 of a second before retry. */
			msleep(200);
			break;
		}
		balloon_page_push(&pages, page);
	}
	t1 = ktime_get_ns();
	st->alloc_ns += t1 - t0;

	mutex_lock(&vb->balloon_lock);

	vb->num_pfns = 0;
	while ((page = balloon_page_pop(&pages))) {
		balloon_page_enqueue(&vb->vb_dev_info, page);

		set_page_pfns(vb, vb->pfns + vb->num_pfns, page);
		vb->num_pages += VIRTIO_BALLOON_PAGES_PER_PAGE;
		if (!virtio_has_feature(vb->vdev,
					VIRTIO_BALLOON_F_DEFLATE_ON_OOM))
			adjust_managed_page_count(page, -1);
		vb->num_pfns += VIRTIO_BALLOON_PAGES_PER_PAGE;
	}

	num_allocated_pages = vb->num_pfns;
	t2 = ktime_get_ns();
	st->build_ns += t2 - t1;
	/* Did we get any? */
	if (vb->num_pfns != 0) {
		tell_host(vb, vb->inflate_vq);
		st->send_ns += ktime_get_ns() - t2;
		st->calls++;
		st->elems++;
		st->kicks++;
		st->pages += vb->num_pfns / VIRTIO_BALLOON_PAGES_PER_PAGE;
	}
	mutex_unlock(&vb->balloon_lock);

	return num_allocated_pages;
}

static void release_pages_balloon(struct virtio_balloon *vb,
				  struct list_head *pages)
{
	struct page *page, *next;

	list_for_each_entry_safe(page, next, pages, lru) {
		if (!virtio_has_feature(vb->vdev,
					VIRTIO_BALLOON_F_DEFLATE_ON_OOM))
			adjust_managed_page_count(page, 1);
		list_del(&page->lru);
		put_page(page); /* balloon reference */
	}
}

static unsigned int leak_balloon_pfn(struct virtio_balloon *vb, size_t num)
{
	struct sg_counters *st = &vb->deflate_stats;
	unsigned int num_freed_pages;
	struct page *page;
	struct balloon_dev_info *vb_dev_info = &vb->vb_dev_info;
	LIST_HEAD(pages);
	u64 t0, t1;

	/* We can only do one array worth at a time. */
	num = min(num, ARRAY_SIZE(vb->pfns));

	mutex_lock(&vb->balloon_lock);
	t0 = ktime_get_ns();
	/* We can't release more pages than taken */
	num = min(num, (size_t)vb->num_pages);
	for (vb->num_pfns = 0; vb->num_pfns < num;
	     vb->num_pfns += VIRTIO_BALLOON_PAGES_PER_PAGE) {
		page = balloon_page_dequeue(vb_dev_info);
		if (!page)
			break;
		set_page_pfns(vb, vb->pfns + vb->num_pfns, page);
		list_add(&page->lru, &pages);
		vb->num_pages -= VIRTIO_BALLOON_PAGES_PER_PAGE;
	}

	num_freed_pages = vb->num_pfns;
	t1 = ktime_get_ns();
	st->build_ns += t1 - t0;
	/*
	 * Note that if VIRTIO_BALLOON_F_MUST_TELL_HOST is negotiated we
	 * *have* to tell the host before releasing the pages.
	 */
	if (vb->num_pfns != 0) {
		tell_host(vb, vb->deflate_vq);
		st->send_ns += ktime_get_ns() - t1;
		st->calls++;
		st->elems++;
		st->kicks++;
		st->pages += vb->num_pfns / VIRTIO_BALLOON_PAGES_PER_PAGE;
	}
	release_pages_balloon(vb, &pages);
	mutex_unlock(&vb->balloon_lock);
	return num_freed_pages;
}

/* ------------------------------------------------------------------------
 * SG path (VIRTIO_BALLOON_F_SG negotiated)
 * ------------------------------------------------------------------------ */

/*
 * An element's token: the call's generation and the index of its first
 * range, so that a used buffer is matched to its element and a late one
 * (from a call that abandoned it) is recognised.
 */
#define SG_TOKEN_BITS	16
static_assert(SG_RANGES_MAX < (1U << SG_TOKEN_BITS));

static void *sg_token(unsigned int gen, unsigned int first)
{
	return (void *)((((unsigned long)gen << SG_TOKEN_BITS | first) << 1) | 1);
}

/* One sg_tell_host() call. */
struct sg_call {
	unsigned int gen;
	unsigned int inflight;	/* elements added, not yet returned */
	unsigned int first_bad;	/* first range of the first bad element */
	struct sg_counters *st;
};

/* Detach used buffers; true once none of ours is in flight any more. */
static bool sg_reap(struct virtio_balloon *vb, struct virtqueue *vq,
		    struct sg_call *c)
{
	unsigned int len, first;
	unsigned long v;
	void *data;

	while (c->inflight && (data = virtqueue_get_buf(vq, &len))) {
		v = (unsigned long)data >> 1;
		first = v & ((1U << SG_TOKEN_BITS) - 1);
		if ((unsigned int)(v >> SG_TOKEN_BITS) != c->gen ||
		    !test_and_clear_bit(first, vb->sg_out)) {
			c->st->stale++;
			continue;
		}
		c->inflight--;
		if (len) {
			/* The device did not handle this element. */
			c->st->failed++;
			c->first_bad = min(c->first_bad, first);
		}
	}
	/* A broken queue returns nothing; do not wait for it forever. */
	return !c->inflight || virtqueue_is_broken(vq);
}

/*
 * Kick once, then wait until the device has returned every element, at
 * most sg_timeout_ms: elements still out then are abandoned (their ring
 * slots stay the device's; their first ranges go to sg_lost).
 */
static void sg_flush(struct virtio_balloon *vb, struct virtqueue *vq,
		     struct sg_call *c)
{
	unsigned int first;

	if (!c->inflight)
		return;
	virtqueue_kick(vq);
	c->st->kicks++;
	if (sg_timeout_ms)
		wait_event_timeout(vb->acked, sg_reap(vb, vq, c),
				   msecs_to_jiffies(sg_timeout_ms));
	else
		wait_event(vb->acked, sg_reap(vb, vq, c));
	if (!c->inflight)
		return;
	first = find_first_bit(vb->sg_out, SG_RANGES_MAX);
	dev_warn_ratelimited(&vb->vdev->dev,
			     "%s: %u element(s) not returned by the device%s, abandoned\n",
			     vq->name, c->inflight,
			     virtqueue_is_broken(vq) ? " (queue broken)" :
			     " within sg_timeout_ms");
	c->st->abandoned += c->inflight;
	c->first_bad = min(c->first_bad, first);
	bitmap_or(vb->sg_lost, vb->sg_lost, vb->sg_out, SG_RANGES_MAX);
	bitmap_zero(vb->sg_out, SG_RANGES_MAX);
	c->inflight = 0;
}

/*
 * GFP for the indirect descriptor table allocated by virtqueue_add_inbuf()
 * while balloon_lock is held.  It must never invoke the OOM killer: the
 * OOM notifier (deflate-on-OOM) takes balloon_lock.  If it fails, the ring
 * falls back to direct descriptors.
 */
#define SG_ADD_GFP	(GFP_KERNEL | __GFP_NORETRY | __GFP_NOWARN)
#define SG_ADD_GFP_OOM	(GFP_NOWAIT | __GFP_NOWARN)

/*
 * Report @nr ranges (sorted, each at most SG_RANGE_MAX_PAGES) on @vq.
 * Called with balloon_lock held.  Returns how many ranges, from the first
 * one, the device took; when that is less than @nr an add failed, or an
 * element came back as not handled or did not come back (its first range
 * is then set in sg_lost), and the rest count as not reported.  Nothing of
 * this call is waited for any more on return.
 */
static unsigned int sg_tell_host(struct virtio_balloon *vb,
				 struct virtqueue *vq,
				 const struct sg_range *ranges, unsigned int nr,
				 gfp_t gfp, struct sg_counters *st)
{
	bool indirect = virtio_has_feature(vb->vdev,
					   VIRTIO_RING_F_INDIRECT_DESC);
	unsigned int done = 0, len, n, k;
	struct sg_call c = { .gen = ++vb->sg_gen, .first_bad = nr, .st = st };
	int err;

	lockdep_assert_held(&vb->balloon_lock);

	/* Used buffers left behind by anything earlier: detach them first. */
	while (virtqueue_get_buf(vq, &len))
		st->stale++;
	bitmap_zero(vb->sg_lost, SG_RANGES_MAX);

	while (done < nr) {
		n = min(nr - done, vb->elem_max);

		/*
		 * With indirect descriptors an element takes one ring slot
		 * (n if the indirect table cannot be allocated); without, n.
		 * Ring full: send what is queued and wait for all of it.
		 */
		if (vq->num_free < (indirect && n > 1 ? 1 : n))
			sg_flush(vb, vq, &c);
		/* The device failed or kept an element: bail out. */
		if (c.first_bad < nr)
			break;

		sg_init_table(vb->sgl, n);
		for (k = 0; k < n; k++) {
			const struct sg_range *r = &ranges[done + k];

			sg_set_page(&vb->sgl[k], pfn_to_page(r->pfn),
				    r->npages << PAGE_SHIFT, 0);
			st->max_range = max_t(u64, st->max_range, r->npages);
		}
		/* Device-writable: the device gets the memory. */
		err = virtqueue_add_inbuf(vq, vb->sgl, n,
					  sg_token(c.gen, done), gfp);
		if (err == -ENOSPC && c.inflight) {
			/*
			 * No memory for the indirect table and not enough
			 * free slots for direct descriptors: empty the ring
			 * (an element always fits an empty one) and retry.
			 */
			sg_flush(vb, vq, &c);
			if (c.first_bad < nr)
				break;
			err = virtqueue_add_inbuf(vq, vb->sgl, n,
						  sg_token(c.gen, done), gfp);
		}
		if (err) {
			st->errors++;
			dev_warn_ratelimited(&vb->vdev->dev,
					     "%s: adding %u range(s) failed (%d), %u of %u reported\n",
					     vq->name, n, err, done, nr);
			break;
		}
		set_bit(done, vb->sg_out);
		c.inflight++;
		st->elems++;
		st->ranges += n;
		done += n;
	}

	sg_flush(vb, vq, &c);
	return min(done, c.first_bad);
}

/* Whether range @i belongs to an element the device never returned. */
static bool sg_range_lost(struct virtio_balloon *vb, unsigned int i)
{
	return test_bit(i - i % vb->elem_max, vb->sg_lost);
}

static int sg_block_cmp(const void *a, const void *b)
{
	const struct sg_block *ba = a, *bb = b;

	if (ba->pfn < bb->pfn)
		return -1;
	return ba->pfn > bb->pfn;
}

/*
 * Sort @nb blocks by address and merge adjacent ones into ranges of at most
 * SG_RANGE_MAX_PAGES in @r (SG_RANGES_MAX entries).  Every block lies whole
 * in one range, and the blocks of range i follow those of range i - 1.
 * Returns the number of ranges.
 */
static unsigned int sg_blocks_to_ranges(struct sg_block *b, unsigned int nb,
					struct sg_range *r)
{
	unsigned int i, nr = 0;

	sort(b, nb, sizeof(*b), sg_block_cmp, NULL);
	for (i = 0; i < nb; i++) {
		unsigned long n = 1UL << b[i].order;

		if (nr && r[nr - 1].pfn + r[nr - 1].npages == b[i].pfn &&
		    r[nr - 1].npages + n <= SG_RANGE_MAX_PAGES) {
			r[nr - 1].npages += n;
			continue;
		}
		r[nr].pfn = b[i].pfn;
		r[nr].npages = n;
		nr++;
	}
	return nr;
}

/*
 * One block for the balloon.  Order 0: balloon_page_alloc() (as the stock
 * driver, may reclaim).  Higher orders only take what is free right now: no
 * direct reclaim, no compaction, no kswapd wake-up, no retries, no
 * emergency reserves, no warning.  @split: split the block into order-0
 * pages (sg_chunk=0, they go on the balloon list one by one); else it stays
 * one allocation, freed whole with __free_pages().
 */
static struct page *sg_alloc_block(unsigned int order, bool split)
{
	struct page *page;
	gfp_t gfp;

	if (!order)
		return balloon_page_alloc();
	gfp = (balloon_mapping_gfp_mask() & ~__GFP_RECLAIM) |
	      __GFP_NORETRY | __GFP_NOWARN | __GFP_NOMEMALLOC;
	page = alloc_pages(gfp, order);
	if (page && split)
		split_page(page, order);
	return page;
}

/*
 * Chunked blocks (order > 0, sg_chunk=1) are kept off the balloon's page
 * list, on vb->blocks[order], linked through the first page's lru, the
 * order in its page_private.  balloon_lock protects the lists and counts.
 */
static void sg_block_link(struct virtio_balloon *vb, struct page *page,
			  unsigned int order)
{
	set_page_private(page, order);
	list_add(&page->lru, &vb->blocks[order]);
	vb->nr_blocks[order]++;
	vb->block_pages += 1UL << order;
	vb->num_pages += VIRTIO_BALLOON_PAGES_PER_PAGE << order;
}

static void sg_block_unlink(struct virtio_balloon *vb, struct page *page,
			    unsigned int order)
{
	list_del(&page->lru);
	set_page_private(page, 0);
	vb->nr_blocks[order]--;
	vb->block_pages -= 1UL << order;
	vb->num_pages -= VIRTIO_BALLOON_PAGES_PER_PAGE << order;
}

/* An order-0 page onto the balloon list (movable: balloon compaction). */
static void sg_page_insert(struct virtio_balloon *vb, struct page *page)
{
	balloon_page_enqueue(&vb->vb_dev_info, page);
	vb->num_pages += VIRTIO_BALLOON_PAGES_PER_PAGE;
	if (!virtio_has_feature(vb->vdev, VIRTIO_BALLOON_F_DEFLATE_ON_OOM))
		adjust_managed_page_count(page, -1);
}

static unsigned int fill_balloon_sg(struct virtio_balloon *vb, size_t num)
{
	struct sg_counters *st = &vb->inflate_stats;
	struct sg_block *b = vb->fill_blocks;
	struct sg_range *r = vb->fill_ranges;
	unsigned long want, got = 0, told_pages = 0, pfn, end;
	unsigned int order = vb->max_order, nb = 0, nr, told, i, j;
	bool chunk = vb->chunk, keep;
	struct page *page;
	u64 t0 = ktime_get_ns(), t1, t2;

	want = min_t(size_t, num / VIRTIO_BALLOON_PAGES_PER_PAGE,
		     SG_BATCH_PAGES);
	if (!want)
		return 0;

	/* Allocate outside balloon_lock, as the stock driver does. */
	while (got < want && nb < SG_RANGES_MAX) {
		/* Never take more than asked for. */
		while (order && (1UL << order) > want - got)
			order--;
		page = sg_alloc_block(order, !chunk);
		if (!page) {
			vb->order_fails[order]++;
			if (order) {
				/* This order is exhausted for this call. */
				order--;
				continue;
			}
			dev_info_ratelimited(&vb->vdev->dev,
					     "Out of puff! Can't get %u pages\n",
					     VIRTIO_BALLOON_PAGES_PER_PAGE);
			/* Sleep for at least 1/5 of a second before retry. */
			msleep(200);
			break;
		}
		vb->order_allocs[order]++;
		b[nb].pfn = page_to_pfn(page);
		b[nb].order = order;
		b[nb].unreported = false;
		nb++;
		got += 1UL << order;
		cond_resched();
	}
	t1 = ktime_get_ns();
	st->alloc_ns += t1 - t0;
	if (!nb)
		return 0;

	nr = sg_blocks_to_ranges(b, nb, r);

	mutex_lock(&vb->balloon_lock);
	st->calls++;
	t2 = ktime_get_ns();
	st->build_ns += t2 - t1;
	told = sg_tell_host(vb, vb->inflate_vq, r, nr, SG_ADD_GFP, st);
	t1 = ktime_get_ns();
	st->send_ns += t1 - t2;

	/*
	 * Reported ranges, and those of elements the device never returned
	 * (it may still discard them): into the balloon.  A chunked block
	 * once, on its order's list; order-0 pages and the pages of split
	 * blocks on the balloon list, one by one.  Decided here, under
	 * balloon_lock: sg_lost belongs to the next sg_tell_host() call.
	 */
	for (i = 0, j = 0; i < nr; i++) {
		keep = i < told || sg_range_lost(vb, i);
		end = r[i].pfn + r[i].npages;
		for (; j < nb && b[j].pfn < end; j++) {
			if (!keep) {
				b[j].unreported = true;
				continue;
			}
			page = pfn_to_page(b[j].pfn);
			if (chunk && b[j].order) {
				sg_block_link(vb, page, b[j].order);
				if (!virtio_has_feature(vb->vdev,
							VIRTIO_BALLOON_F_DEFLATE_ON_OOM))
					adjust_managed_page_count(page,
								  -(1L << b[j].order));
				continue;
			}
			for (pfn = b[j].pfn; pfn < b[j].pfn + (1UL << b[j].order); pfn++)
				sg_page_insert(vb, pfn_to_page(pfn));
		}
		if (keep)
			told_pages += r[i].npages;
		cond_resched();
	}
	st->pages += told_pages;
	st->build_ns += ktime_get_ns() - t1;
	mutex_unlock(&vb->balloon_lock);

	/* Not reported (add failed, not handled): back to the allocator. */
	for (j = 0; j < nb; j++) {
		if (!b[j].unreported)
			continue;
		if (chunk) {
			__free_pages(pfn_to_page(b[j].pfn), b[j].order);
		} else {
			for (pfn = b[j].pfn; pfn < b[j].pfn + (1UL << b[j].order); pfn++)
				__free_page(pfn_to_page(pfn));
		}
		st->unreported += 1UL << b[j].order;
		cond_resched();
	}
	/* Do not spin on a failing queue: the size work is requeued. */
	if (told < nr)
		msleep(200);

	return told_pages * VIRTIO_BALLOON_PAGES_PER_PAGE;
}

static int sg_page_cmp(void *priv, const struct list_head *a,
		       const struct list_head *b)
{
	unsigned long pa = page_to_pfn(list_entry(a, struct page, lru));
	unsigned long pb = page_to_pfn(list_entry(b, struct page, lru));

	return pa < pb ? -1 : pa > pb;
}

/*
 * Deflate up to @want guest pages of the balloon's page list (order-0
 * pages) with SG, balloon_lock held.  Returns the pages released.  Sets
 * *ret_failed when the device did not take every range (the pages of those
 * stay in the balloon, unless @force: device removal releases them all the
 * same), *ret_sent when anything was sent.
 */
static unsigned long leak_pages_sg(struct virtio_balloon *vb,
				   unsigned long want, gfp_t gfp, bool force,
				   bool *ret_failed, bool *ret_sent)
{
	struct sg_counters *st = &vb->deflate_stats;
	struct sg_range *r = vb->leak_ranges;
	unsigned long got, n, told_pages = 0, i;
	unsigned int nr = 0, told;
	struct page *page, *next;
	LIST_HEAD(pages);
	LIST_HEAD(told_list);
	u64 t0, t1;

	t0 = ktime_get_ns();
	/* In slices: the dequeue holds pages_lock with interrupts off. */
	for (got = 0; got < want; got += n) {
		n = balloon_page_list_dequeue(&vb->vb_dev_info, &pages,
					      min_t(unsigned long, want - got,
						    SG_DEQUEUE_SLICE));
		if (!n)
			break;
		cond_resched();
	}
	if (!got)
		return 0;
	*ret_sent = true;

	/* Runs of contiguous pages; stop at SG_RANGES_MAX ranges. */
	list_sort(NULL, &pages, sg_page_cmp);
	list_for_each_entry(page, &pages, lru) {
		unsigned long pfn = page_to_pfn(page);

		if (nr && r[nr - 1].pfn + r[nr - 1].npages == pfn &&
		    r[nr - 1].npages < SG_RANGE_MAX_PAGES) {
			r[nr - 1].npages++;
			continue;
		}
		if (nr == SG_RANGES_MAX)
			break;	/* the rest stays in the balloon */
		r[nr].pfn = pfn;
		r[nr].npages = 1;
		nr++;
	}

	t1 = ktime_get_ns();
	st->build_ns += t1 - t0;
	told = sg_tell_host(vb, vb->deflate_vq, r, nr, gfp, st);
	st->send_ns += ktime_get_ns() - t1;
	if (told < nr)
		*ret_failed = true;
	/* Deflate: whatever the device did not take stays in the balloon. */
	for (i = 0; i < (force ? nr : told); i++)
		told_pages += r[i].npages;

	/* The first told_pages pages of the sorted list were reported. */
	i = 0;
	list_for_each_entry_safe(page, next, &pages, lru) {
		if (i++ == told_pages)
			break;
		list_move_tail(&page->lru, &told_list);
	}
	vb->num_pages -= told_pages * VIRTIO_BALLOON_PAGES_PER_PAGE;
	st->pages += told_pages;

	/* Everything else goes back into the balloon. */
	if (!list_empty(&pages)) {
		if (told < nr)
			st->unreported += got - told_pages;
		balloon_page_list_enqueue(&vb->vb_dev_info, &pages);
	}

	release_pages_balloon(vb, &told_list);
	return told_pages;
}

/*
 * Deflate whole chunked blocks that fit in @want guest pages, largest
 * first, balloon_lock held: each block lies whole in one range, and is
 * freed whole.  Returns the pages released; *ret_failed / *ret_sent as
 * leak_pages_sg().  Blocks the device did not take go back on their lists.
 */
static unsigned long leak_blocks_sg(struct virtio_balloon *vb,
				    unsigned long want, gfp_t gfp, bool force,
				    bool *ret_failed, bool *ret_sent)
{
	struct sg_counters *st = &vb->deflate_stats;
	struct sg_block *b = vb->leak_blocks;
	struct sg_range *r = vb->leak_ranges;
	unsigned long got = 0, told_pages = 0;
	unsigned int o, nb = 0, nr, told, i, j;
	struct page *page;
	bool out;
	u64 t0 = ktime_get_ns(), t1;

	for (o = SG_NR_ORDERS - 1; o > 0; o--) {
		while (vb->nr_blocks[o] && (1UL << o) <= want - got &&
		       nb < SG_RANGES_MAX) {
			page = list_first_entry(&vb->blocks[o], struct page, lru);
			sg_block_unlink(vb, page, o);
			b[nb].pfn = page_to_pfn(page);
			b[nb].order = o;
			b[nb].unreported = false;
			nb++;
			got += 1UL << o;
		}
	}
	if (!nb)
		return 0;
	*ret_sent = true;

	nr = sg_blocks_to_ranges(b, nb, r);
	t1 = ktime_get_ns();
	st->build_ns += t1 - t0;
	told = sg_tell_host(vb, vb->deflate_vq, r, nr, gfp, st);
	t0 = ktime_get_ns();
	st->send_ns += t0 - t1;
	if (told < nr)
		*ret_failed = true;

	for (i = 0, j = 0; i < nr; i++) {
		out = force || i < told;
		for (; j < nb && b[j].pfn < r[i].pfn + r[i].npages; j++) {
			page = pfn_to_page(b[j].pfn);
			if (!out) {
				/* Not taken: it stays in the balloon. */
				sg_block_link(vb, page, b[j].order);
				st->unreported += 1UL << b[j].order;
				continue;
			}
			if (!virtio_has_feature(vb->vdev,
						VIRTIO_BALLOON_F_DEFLATE_ON_OOM))
				adjust_managed_page_count(page, 1L << b[j].order);
			__free_pages(page, b[j].order);
		}
		if (out)
			told_pages += r[i].npages;
	}
	st->pages += told_pages;
	st->build_ns += ktime_get_ns() - t0;
	return told_pages;
}

/*
 * A deflate of part of a block: split the smallest chunked block into
 * order-0 pages on the balloon list (as sg_chunk=0 keeps all pages), from
 * where leak_pages_sg() takes what is asked.  balloon_lock held.  Returns
 * false when there is no block.
 */
static bool sg_block_split(struct virtio_balloon *vb)
{
	unsigned long pfn, i;
	struct page *page;
	unsigned int o;

	for (o = 1; o < SG_NR_ORDERS && !vb->nr_blocks[o]; o++)
		;
	if (o == SG_NR_ORDERS)
		return false;
	page = list_first_entry(&vb->blocks[o], struct page, lru);
	sg_block_unlink(vb, page, o);
	split_page(page, o);
	pfn = page_to_pfn(page);
	/* Already counted off the managed pages when it was ballooned. */
	for (i = 0; i < (1UL << o); i++)
		balloon_page_enqueue(&vb->vb_dev_info, pfn_to_page(pfn + i));
	vb->num_pages += VIRTIO_BALLOON_PAGES_PER_PAGE << o;
	vb->block_splits++;
	return true;
}

/*
 * Deflate up to @num balloon pages with SG: whole chunked blocks first,
 * then pages of the balloon list, then, if that is not enough, one block
 * split and the rest taken from its pages.  @force (device removal):
 * pages whose ranges could not be reported are released all the same
 * instead of being kept in the balloon.
 */
static unsigned int leak_balloon_sg(struct virtio_balloon *vb, size_t num,
				    gfp_t gfp, bool force)
{
	unsigned long want, done = 0;
	bool failed = false, sent = false;

	mutex_lock(&vb->balloon_lock);
	/* We can't release more pages than taken */
	num = min(num, (size_t)vb->num_pages);
	want = min_t(size_t, num / VIRTIO_BALLOON_PAGES_PER_PAGE,
		     SG_BATCH_PAGES);
	if (vb->chunk && want)
		done = leak_blocks_sg(vb, want, gfp, force, &failed, &sent);
	if ((!failed || force) && done < want)
		done += leak_pages_sg(vb, want - done, gfp, force, &failed,
				      &sent);
	if ((!failed || force) && done < want && sg_block_split(vb))
		done += leak_pages_sg(vb, want - done, gfp, force, &failed,
				      &sent);
	if (sent)
		vb->deflate_stats.calls++;
	mutex_unlock(&vb->balloon_lock);

	/* Do not spin on a failing queue (not under OOM, not on removal). */
	if (failed && !force && gfpflags_allow_blocking(gfp))
		msleep(200);

	return done * VIRTIO_BALLOON_PAGES_PER_PAGE;
}

/* ------------------------------------------------------------------------
 * Common
 * ------------------------------------------------------------------------ */

static unsigned int fill_balloon(struct virtio_balloon *vb, size_t num)
{
	return vb->use_sg ? fill_balloon_sg(vb, num) : fill_balloon_pfn(vb, num);
}

static unsigned int leak_balloon(struct virtio_balloon *vb, size_t num)
{
	return vb->use_sg ? leak_balloon_sg(vb, num, SG_ADD_GFP, false) :
			    leak_balloon_pfn(vb, num);
}

static inline void update_stat(struct virtio_balloon *vb, int idx,
			       u16 tag, u64 val)
{
	BUG_ON(idx >= VIRTIO_BALLOON_S_NR);
	vb->stats[idx].tag = cpu_to_virtio16(vb->vdev, tag);
	vb->stats[idx].val = cpu_to_virtio64(vb->vdev, val);
}

#define pages_to_bytes(x) ((u64)(x) << PAGE_SHIFT)

static unsigned int update_balloon_stats(struct virtio_balloon *vb)
{
	unsigned long events[NR_VM_EVENT_ITEMS];
	struct sysinfo i;
	unsigned int idx = 0;
	long available;
	unsigned long caches;
#ifdef VIRTIO_BALLOON_S_OOM_KILL
	unsigned long stall = 0;
	int zid;
#endif

	all_vm_events(events);
	si_meminfo(&i);

	available = si_mem_available();
	caches = global_node_page_state(NR_FILE_PAGES);

#ifdef CONFIG_VM_EVENT_COUNTERS
	update_stat(vb, idx++, VIRTIO_BALLOON_S_SWAP_IN,
		    pages_to_bytes(events[PSWPIN]));
	update_stat(vb, idx++, VIRTIO_BALLOON_S_SWAP_OUT,
		    pages_to_bytes(events[PSWPOUT]));
	update_stat(vb, idx++, VIRTIO_BALLOON_S_MAJFLT, events[PGMAJFAULT]);
	update_stat(vb, idx++, VIRTIO_BALLOON_S_MINFLT, events[PGFAULT]);
#ifdef VIRTIO_BALLOON_S_OOM_KILL
	/* Linux 6.12's statistics, tags 10-15, as its stock driver sends them */
	update_stat(vb, idx++, VIRTIO_BALLOON_S_OOM_KILL, events[OOM_KILL]);
	for (zid = 0; zid < MAX_NR_ZONES; zid++)
		stall += events[ALLOCSTALL_NORMAL - ZONE_NORMAL + zid];
	update_stat(vb, idx++, VIRTIO_BALLOON_S_ALLOC_STALL, stall);
	update_stat(vb, idx++, VIRTIO_BALLOON_S_ASYNC_SCAN,
		    pages_to_bytes(events[PGSCAN_KSWAPD]));
	update_stat(vb, idx++, VIRTIO_BALLOON_S_DIRECT_SCAN,
		    pages_to_bytes(events[PGSCAN_DIRECT]));
	update_stat(vb, idx++, VIRTIO_BALLOON_S_ASYNC_RECLAIM,
		    pages_to_bytes(events[PGSTEAL_KSWAPD]));
	update_stat(vb, idx++, VIRTIO_BALLOON_S_DIRECT_RECLAIM,
		    pages_to_bytes(events[PGSTEAL_DIRECT]));
#endif
#ifdef CONFIG_HUGETLB_PAGE
	update_stat(vb, idx++, VIRTIO_BALLOON_S_HTLB_PGALLOC,
		    events[HTLB_BUDDY_PGALLOC]);
	update_stat(vb, idx++, VIRTIO_BALLOON_S_HTLB_PGFAIL,
		    events[HTLB_BUDDY_PGALLOC_FAIL]);
#endif
#endif
	update_stat(vb, idx++, VIRTIO_BALLOON_S_MEMFREE,
		    pages_to_bytes(i.freeram));
	update_stat(vb, idx++, VIRTIO_BALLOON_S_MEMTOT,
		    pages_to_bytes(i.totalram));
	update_stat(vb, idx++, VIRTIO_BALLOON_S_AVAIL,
		    pages_to_bytes(available));
	update_stat(vb, idx++, VIRTIO_BALLOON_S_CACHES,
		    pages_to_bytes(caches));

	return idx;
}

/*
 * The stats queue runs the other way round: the driver primes it with one
 * buffer, the host returns it to ask for fresh stats, and the driver
 * refills it from a freezable workqueue (stats collection can sleep).
 */
static void stats_request(struct virtqueue *vq)
{
	struct virtio_balloon *vb = vq->vdev->priv;

	spin_lock(&vb->stop_update_lock);
	if (!vb->stop_update)
		queue_work(system_freezable_wq, &vb->update_balloon_stats_work);
	spin_unlock(&vb->stop_update_lock);
}

static void stats_handle_request(struct virtio_balloon *vb)
{
	struct virtqueue *vq;
	struct scatterlist sg;
	unsigned int len, num_stats;

	num_stats = update_balloon_stats(vb);

	vq = vb->stats_vq;
	if (!virtqueue_get_buf(vq, &len))
		return;
	sg_init_one(&sg, vb->stats, sizeof(vb->stats[0]) * num_stats);
	virtqueue_add_outbuf(vq, &sg, 1, vb, GFP_KERNEL);
	virtqueue_kick(vq);
}

static inline s64 towards_target(struct virtio_balloon *vb)
{
	s64 target;
	u32 num_pages;

	/* Legacy balloon config space is LE, unlike all other devices. */
	virtio_cread_le(vb->vdev, struct virtio_balloon_config, num_pages,
			&num_pages);

	/* Aligned up to guest page size: no endless inflate/deflate. */
	target = ALIGN(num_pages, VIRTIO_BALLOON_PAGES_PER_PAGE);
	return target - vb->num_pages;
}

static void virtballoon_changed(struct virtio_device *vdev)
{
	struct virtio_balloon *vb = vdev->priv;
	unsigned long flags;

	spin_lock_irqsave(&vb->stop_update_lock, flags);
	if (!vb->stop_update)
		queue_work(system_freezable_wq, &vb->update_balloon_size_work);
	spin_unlock_irqrestore(&vb->stop_update_lock, flags);
}

static void update_balloon_size(struct virtio_balloon *vb)
{
	u32 actual = vb->num_pages;

	/* Legacy balloon config space is LE, unlike all other devices. */
	virtio_cwrite_le(vb->vdev, struct virtio_balloon_config, actual,
			 &actual);
}

static void update_balloon_stats_func(struct work_struct *work)
{
	struct virtio_balloon *vb;

	vb = container_of(work, struct virtio_balloon,
			  update_balloon_stats_work);
	stats_handle_request(vb);
}

static void update_balloon_size_func(struct work_struct *work)
{
	struct virtio_balloon *vb;
	s64 diff;

	vb = container_of(work, struct virtio_balloon,
			  update_balloon_size_work);
	diff = towards_target(vb);

	if (!diff)
		return;

	if (diff > 0)
		diff -= fill_balloon(vb, diff);
	else
		diff += leak_balloon(vb, -diff);
	update_balloon_size(vb);

	if (diff)
		queue_work(system_freezable_wq, work);
}

/*
 * Inflate and deflate always; stats only with the feature (a queue without a
 * name is skipped).  Linux 6.11 replaced virtio_find_vqs()'s arrays of
 * callbacks and names with one array of struct virtqueue_info.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
static int find_vqs(struct virtio_balloon *vb, struct virtqueue **vqs, bool stats)
{
	struct virtqueue_info vqs_info[VIRTIO_BALLOON_VQ_MAX] = {
		[VIRTIO_BALLOON_VQ_INFLATE] = { "inflate", balloon_ack },
		[VIRTIO_BALLOON_VQ_DEFLATE] = { "deflate", balloon_ack },
	};

	if (stats)
		vqs_info[VIRTIO_BALLOON_VQ_STATS] =
			(struct virtqueue_info){ "stats", stats_request };
	return virtio_find_vqs(vb->vdev, VIRTIO_BALLOON_VQ_MAX, vqs, vqs_info,
			       NULL);
}
#else
static int find_vqs(struct virtio_balloon *vb, struct virtqueue **vqs, bool stats)
{
	vq_callback_t *callbacks[VIRTIO_BALLOON_VQ_MAX] = {
		[VIRTIO_BALLOON_VQ_INFLATE] = balloon_ack,
		[VIRTIO_BALLOON_VQ_DEFLATE] = balloon_ack,
	};
	const char *names[VIRTIO_BALLOON_VQ_MAX] = {
		[VIRTIO_BALLOON_VQ_INFLATE] = "inflate",
		[VIRTIO_BALLOON_VQ_DEFLATE] = "deflate",
	};

	if (stats) {
		callbacks[VIRTIO_BALLOON_VQ_STATS] = stats_request;
		names[VIRTIO_BALLOON_VQ_STATS] = "stats";
	}
	return virtio_find_vqs(vb->vdev, VIRTIO_BALLOON_VQ_MAX, vqs, callbacks,
			       names, NULL);
}
#endif

static int init_vqs(struct virtio_balloon *vb)
{
	struct virtqueue *vqs[VIRTIO_BALLOON_VQ_MAX];
	int err;

	err = find_vqs(vb, vqs,
		       virtio_has_feature(vb->vdev, VIRTIO_BALLOON_F_STATS_VQ));
	if (err)
		return err;

	vb->inflate_vq = vqs[VIRTIO_BALLOON_VQ_INFLATE];
	vb->deflate_vq = vqs[VIRTIO_BALLOON_VQ_DEFLATE];
	if (virtio_has_feature(vb->vdev, VIRTIO_BALLOON_F_STATS_VQ)) {
		struct scatterlist sg;
		unsigned int num_stats;

		vb->stats_vq = vqs[VIRTIO_BALLOON_VQ_STATS];

		/*
		 * Prime this virtqueue with one buffer so the hypervisor can
		 * use it to signal us later (it can't be broken yet!).
		 */
		num_stats = update_balloon_stats(vb);

		sg_init_one(&sg, vb->stats, sizeof(vb->stats[0]) * num_stats);
		err = virtqueue_add_outbuf(vb->stats_vq, &sg, 1, vb,
					   GFP_KERNEL);
		if (err) {
			dev_warn(&vb->vdev->dev, "%s: add stat_vq failed\n",
				 __func__);
			return err;
		}
		virtqueue_kick(vb->stats_vq);
	}

	return 0;
}

#ifdef CONFIG_BALLOON_COMPACTION
/*
 * virtballoon_migratepage - balloon page migration on behalf of a
 * compaction thread (called under page lock): put @newpage into the balloon
 * and tell the host (inflate), then tell the host @page left it (deflate).
 * With SG each of the two is a one-range element.
 */
static int virtballoon_migratepage(struct balloon_dev_info *vb_dev_info,
				   struct page *newpage, struct page *page,
				   enum migrate_mode mode)
{
	struct virtio_balloon *vb = container_of(vb_dev_info,
			struct virtio_balloon, vb_dev_info);
	struct sg_range r;
	unsigned long flags;

	/*
	 * Give up the balloon_lock this turn rather than contend with
	 * leak_balloon() or fill_balloon(); migration is retried later.
	 */
	if (!mutex_trylock(&vb->balloon_lock))
		return -EAGAIN;

	if (vb->use_sg) {
		/* Host first: if that fails nothing has changed yet. */
		r.pfn = page_to_pfn(newpage);
		r.npages = 1;
		if (sg_tell_host(vb, vb->inflate_vq, &r, 1, SG_ADD_GFP,
				 &vb->inflate_stats) != 1) {
			mutex_unlock(&vb->balloon_lock);
			return -EAGAIN;
		}
	}

	get_page(newpage); /* balloon reference */

	/*
	 * When we migrate a page to a different zone and adjusted the
	 * managed page count when inflating, we have to fixup the count of
	 * both involved zones.
	 */
	if (!virtio_has_feature(vb->vdev, VIRTIO_BALLOON_F_DEFLATE_ON_OOM) &&
	    page_zone(page) != page_zone(newpage)) {
		adjust_managed_page_count(page, 1);
		adjust_managed_page_count(newpage, -1);
	}

	/* balloon's page migration 1st step  -- inflate "newpage" */
	spin_lock_irqsave(&vb_dev_info->pages_lock, flags);
	balloon_page_insert(vb_dev_info, newpage);
	vb_dev_info->isolated_pages--;
	__count_vm_event(BALLOON_MIGRATE);
	spin_unlock_irqrestore(&vb_dev_info->pages_lock, flags);
	if (!vb->use_sg) {
		vb->num_pfns = VIRTIO_BALLOON_PAGES_PER_PAGE;
		set_page_pfns(vb, vb->pfns, newpage);
		tell_host(vb, vb->inflate_vq);
	}

	/* balloon's page migration 2nd step -- deflate "page" */
	if (vb->use_sg) {
		r.pfn = page_to_pfn(page);
		r.npages = 1;
		if (sg_tell_host(vb, vb->deflate_vq, &r, 1, SG_ADD_GFP,
				 &vb->deflate_stats) != 1)
			dev_warn_ratelimited(&vb->vdev->dev,
					     "migration: deflate of pfn %lx not reported\n",
					     r.pfn);
	} else {
		vb->num_pfns = VIRTIO_BALLOON_PAGES_PER_PAGE;
		set_page_pfns(vb, vb->pfns, page);
		tell_host(vb, vb->deflate_vq);
	}

	mutex_unlock(&vb->balloon_lock);

	balloon_page_finalize(page);
	put_page(page); /* balloon reference */

	return MIGRATEPAGE_SUCCESS;
}
#endif /* CONFIG_BALLOON_COMPACTION */

static int virtio_balloon_oom_notify(struct notifier_block *nb,
				     unsigned long dummy, void *parm)
{
	struct virtio_balloon *vb = container_of(nb,
						 struct virtio_balloon, oom_nb);
	unsigned long *freed = parm;
	unsigned int leaked;

	/* No sleeping allocation for an indirect table under OOM. */
	if (vb->use_sg)
		leaked = leak_balloon_sg(vb, VIRTIO_BALLOON_OOM_NR_PAGES,
					 SG_ADD_GFP_OOM, false);
	else
		leaked = leak_balloon_pfn(vb, VIRTIO_BALLOON_OOM_NR_PAGES);
	*freed += leaked / VIRTIO_BALLOON_PAGES_PER_PAGE;
	update_balloon_size(vb);

	return NOTIFY_OK;
}

static void sg_print_counters(char *buf, int *len, const char *name,
			      const struct sg_counters *c)
{
	*len += sysfs_emit_at(buf, *len,
			      "%s: calls %llu pages %llu ranges %llu elems %llu kicks %llu errors %llu unreported %llu max_range %llu failed %llu abandoned %llu stale %llu alloc_ns %llu build_ns %llu send_ns %llu\n",
			      name, c->calls, c->pages, c->ranges, c->elems,
			      c->kicks, c->errors, c->unreported, c->max_range,
			      c->failed, c->abandoned, c->stale, c->alloc_ns,
			      c->build_ns, c->send_ns);
}

/*
 * Pages on the balloon's list (and isolated for migration) and in chunked
 * blocks: held now.
 */
static unsigned long sg_pages_held(struct virtio_balloon *vb)
{
	struct balloon_dev_info *b = &vb->vb_dev_info;
	unsigned long flags, n = 0;
	struct list_head *p;

	spin_lock_irqsave(&b->pages_lock, flags);
	list_for_each(p, &b->pages)
		n++;
	n += b->isolated_pages;
	spin_unlock_irqrestore(&b->pages_lock, flags);
	return n + READ_ONCE(vb->block_pages);
}

static ssize_t sg_stats_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	struct virtio_device *vdev = dev_to_virtio(dev);
	struct virtio_balloon *vb = vdev->priv;
	unsigned int o;
	int len = 0;

	len += sysfs_emit_at(buf, len,
			     "sg: %d indirect: %d elem_max: %u max_order: %u num_pages: %u\n",
			     vb->use_sg,
			     virtio_has_feature(vdev, VIRTIO_RING_F_INDIRECT_DESC),
			     vb->elem_max, vb->max_order, vb->num_pages);
	sg_print_counters(buf, &len, "inflate", &vb->inflate_stats);
	sg_print_counters(buf, &len, "deflate", &vb->deflate_stats);
	/*
	 * At rest every element is back: inflight 0, free == size (less the
	 * slots of abandoned elements, which stay the device's).
	 */
	len += sysfs_emit_at(buf, len,
			     "queues: inflate_free %u inflate_size %u deflate_free %u deflate_size %u inflight %u",
			     vb->inflate_vq->num_free,
			     virtqueue_get_vring_size(vb->inflate_vq),
			     vb->deflate_vq->num_free,
			     virtqueue_get_vring_size(vb->deflate_vq),
			     bitmap_weight(vb->sg_out, SG_RANGES_MAX));
	if (sg_count_held)
		len += sysfs_emit_at(buf, len, " held %lu\n", sg_pages_held(vb));
	else
		len += sysfs_emit_at(buf, len, " held -\n");
	len += sysfs_emit_at(buf, len, "order_allocs:");
	for (o = 0; o <= vb->max_order; o++)
		len += sysfs_emit_at(buf, len, " %u:%llu", o,
				     vb->order_allocs[o]);
	len += sysfs_emit_at(buf, len, "\norder_fails:");
	for (o = 0; o <= vb->max_order; o++)
		len += sysfs_emit_at(buf, len, " %u:%llu", o,
				     vb->order_fails[o]);
	len += sysfs_emit_at(buf, len,
			     "\nblocks: chunk %d pages %lu splits %llu held:",
			     vb->chunk, READ_ONCE(vb->block_pages),
			     vb->block_splits);
	for (o = 1; o <= vb->max_order; o++)
		len += sysfs_emit_at(buf, len, " %u:%lu", o,
				     READ_ONCE(vb->nr_blocks[o]));
	len += sysfs_emit_at(buf, len, "\n");
	return len;
}
static DEVICE_ATTR_RO(sg_stats);

static void sg_free(struct virtio_balloon *vb)
{
	kfree(vb->sgl);
	kvfree(vb->fill_ranges);
	kvfree(vb->leak_ranges);
	kvfree(vb->fill_blocks);
	kvfree(vb->leak_blocks);
	vb->sgl = NULL;
	vb->fill_ranges = vb->leak_ranges = NULL;
	vb->fill_blocks = vb->leak_blocks = NULL;
}

/* After init_vqs: size the SG batches for the negotiated queues. */
static int sg_setup(struct virtio_balloon *vb)
{
	struct virtio_device *vdev = vb->vdev;
	unsigned int ring;

	vb->use_sg = virtio_has_feature(vdev, VIRTIO_BALLOON_F_SG);
	if (!vb->use_sg)
		return 0;

	ring = min(virtqueue_get_vring_size(vb->inflate_vq),
		   virtqueue_get_vring_size(vb->deflate_vq));
	vb->elem_max = sg_elem_max ? sg_elem_max :
		virtio_has_feature(vdev, VIRTIO_RING_F_INDIRECT_DESC) ?
		SG_ELEM_MAX_INDIRECT : SG_ELEM_MAX_DIRECT;
	/* An element must fit the ring even without an indirect table. */
	vb->elem_max = clamp(vb->elem_max, 1U, max(ring, 1U));
	vb->max_order = min_t(unsigned int, sg_max_order, SG_NR_ORDERS - 1);
	vb->chunk = sg_chunk;

	vb->sgl = kmalloc_array(vb->elem_max, sizeof(*vb->sgl), GFP_KERNEL);
	vb->fill_ranges = kvmalloc_array(SG_RANGES_MAX,
					 sizeof(*vb->fill_ranges), GFP_KERNEL);
	vb->leak_ranges = kvmalloc_array(SG_RANGES_MAX,
					 sizeof(*vb->leak_ranges), GFP_KERNEL);
	vb->fill_blocks = kvmalloc_array(SG_RANGES_MAX,
					 sizeof(*vb->fill_blocks), GFP_KERNEL);
	vb->leak_blocks = kvmalloc_array(SG_RANGES_MAX,
					 sizeof(*vb->leak_blocks), GFP_KERNEL);
	if (!vb->sgl || !vb->fill_ranges || !vb->leak_ranges ||
	    !vb->fill_blocks || !vb->leak_blocks) {
		sg_free(vb);
		return -ENOMEM;
	}
	dev_info(&vdev->dev,
		 "VIRTIO_BALLOON_F_SG negotiated: ring %u, indirect %d, %u range(s) per element, max order %u, chunked %d\n",
		 ring, virtio_has_feature(vdev, VIRTIO_RING_F_INDIRECT_DESC),
		 vb->elem_max, vb->max_order, vb->chunk);
	return 0;
}

static int virtballoon_probe(struct virtio_device *vdev)
{
	struct virtio_balloon *vb;
	unsigned int i;
	int err;

	if (!vdev->config->get) {
		dev_err(&vdev->dev, "%s failure: config access disabled\n",
			__func__);
		return -EINVAL;
	}

	vdev->priv = vb = kzalloc(sizeof(*vb), GFP_KERNEL);
	if (!vb) {
		err = -ENOMEM;
		goto out;
	}

	INIT_WORK(&vb->update_balloon_stats_work, update_balloon_stats_func);
	INIT_WORK(&vb->update_balloon_size_work, update_balloon_size_func);
	spin_lock_init(&vb->stop_update_lock);
	mutex_init(&vb->balloon_lock);
	init_waitqueue_head(&vb->acked);
	vb->vdev = vdev;

	balloon_devinfo_init(&vb->vb_dev_info);
	for (i = 0; i < SG_NR_ORDERS; i++)
		INIT_LIST_HEAD(&vb->blocks[i]);

	err = init_vqs(vb);
	if (err)
		goto out_free_vb;

	err = sg_setup(vb);
	if (err)
		goto out_del_vqs;

#ifdef CONFIG_BALLOON_COMPACTION
	vb->vb_dev_info.migratepage = virtballoon_migratepage;
#endif

	if (virtio_has_feature(vb->vdev, VIRTIO_BALLOON_F_DEFLATE_ON_OOM)) {
		vb->oom_nb.notifier_call = virtio_balloon_oom_notify;
		vb->oom_nb.priority = VIRTIO_BALLOON_OOM_NOTIFY_PRIORITY;
		err = register_oom_notifier(&vb->oom_nb);
		if (err < 0)
			goto out_free_sg;
	}

	err = device_create_file(&vdev->dev, &dev_attr_sg_stats);
	if (err)
		goto out_unregister_oom;

	dev_info(&vdev->dev, "virtio_balloon_sg: features 0x%llx (sg %d)\n",
		 (unsigned long long)vdev->features, vb->use_sg);

	virtio_device_ready(vdev);

	if (towards_target(vb))
		virtballoon_changed(vdev);
	return 0;

out_unregister_oom:
	if (virtio_has_feature(vb->vdev, VIRTIO_BALLOON_F_DEFLATE_ON_OOM))
		unregister_oom_notifier(&vb->oom_nb);
out_free_sg:
	sg_free(vb);
out_del_vqs:
	vdev->config->del_vqs(vdev);
out_free_vb:
	kfree(vb);
out:
	return err;
}

static void remove_common(struct virtio_balloon *vb)
{
	/* There might be pages left in the balloon: free them. */
	while (vb->num_pages) {
		if (vb->use_sg)
			leak_balloon_sg(vb, vb->num_pages, SG_ADD_GFP, true);
		else
			leak_balloon_pfn(vb, vb->num_pages);
	}
	update_balloon_size(vb);

	/* Now we reset the device so we can clean up the queues. */
	virtio_reset_device(vb->vdev);

	vb->vdev->config->del_vqs(vb->vdev);
}

static void virtballoon_remove(struct virtio_device *vdev)
{
	struct virtio_balloon *vb = vdev->priv;

	device_remove_file(&vdev->dev, &dev_attr_sg_stats);
	if (virtio_has_feature(vb->vdev, VIRTIO_BALLOON_F_DEFLATE_ON_OOM))
		unregister_oom_notifier(&vb->oom_nb);
	spin_lock_irq(&vb->stop_update_lock);
	vb->stop_update = true;
	spin_unlock_irq(&vb->stop_update_lock);
	cancel_work_sync(&vb->update_balloon_size_work);
	cancel_work_sync(&vb->update_balloon_stats_work);

	remove_common(vb);
	sg_free(vb);
	kfree(vb);
}

#ifdef CONFIG_PM_SLEEP
static int virtballoon_freeze(struct virtio_device *vdev)
{
	struct virtio_balloon *vb = vdev->priv;

	/* The workqueue is already frozen by the PM core. */
	remove_common(vb);
	return 0;
}

static int virtballoon_restore(struct virtio_device *vdev)
{
	struct virtio_balloon *vb = vdev->priv;
	int ret;

	ret = init_vqs(vdev->priv);
	if (ret)
		return ret;

	virtio_device_ready(vdev);

	if (towards_target(vb))
		virtballoon_changed(vdev);
	update_balloon_size(vb);
	return 0;
}
#endif

static int virtballoon_validate(struct virtio_device *vdev)
{
	if (!sg)
		__virtio_clear_bit(vdev, VIRTIO_BALLOON_F_SG);
	/*
	 * Balloon addresses (PFNs and SG ranges alike) are guest-physical:
	 * never go through a platform IOMMU / DMA API.
	 */
	__virtio_clear_bit(vdev, VIRTIO_F_ACCESS_PLATFORM);
	return 0;
}

static unsigned int features[] = {
	VIRTIO_BALLOON_F_MUST_TELL_HOST,
	VIRTIO_BALLOON_F_STATS_VQ,
	VIRTIO_BALLOON_F_DEFLATE_ON_OOM,
	VIRTIO_BALLOON_F_SG,
};

static struct virtio_driver virtio_balloon_sg_driver = {
	.feature_table = features,
	.feature_table_size = ARRAY_SIZE(features),
	.driver.name =	KBUILD_MODNAME,
	.driver.owner =	THIS_MODULE,
	.id_table =	id_table,
	.validate =	virtballoon_validate,
	.probe =	virtballoon_probe,
	.remove =	virtballoon_remove,
	.config_changed = virtballoon_changed,
#ifdef CONFIG_PM_SLEEP
	.freeze	=	virtballoon_freeze,
	.restore =	virtballoon_restore,
#endif
};

module_virtio_driver(virtio_balloon_sg_driver);
MODULE_DEVICE_TABLE(virtio, id_table);
MODULE_DESCRIPTION("Virtio balloon driver with VIRTIO_BALLOON_F_SG (balloonmgr SG lab)");
MODULE_LICENSE("GPL");
