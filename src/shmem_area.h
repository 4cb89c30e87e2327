/*
 * shmem_area.h
 *		An area of the library's shared memory, as its module describes it:
 *		ringshard.c asks for every area from its shmem_request_hook and
 *		attaches them from its shmem_startup_hook.
 */
#ifndef RINGSHARD_SHMEM_AREA_H
#define RINGSHARD_SHMEM_AREA_H

#include "postgres.h"

#include "storage/lwlock.h"

typedef struct ShmemArea
{
	const char *name;			/* of the struct, for ShmemInitStruct */
	Size		size;			/* of the struct */
	const char *tranche;		/* its named tranche of LWLocks */
	int			nlocks;			/* ... and their number */

	/*
	 * Takes the attached struct, under AddinShmemInitLock.  When the struct
	 * is new it is zeroed, and new_locks is its tranche, for the module to
	 * set the rest up; otherwise new_locks is NULL.
	 */
	void		(*attach) (void *area, LWLockPadded *new_locks);
} ShmemArea;

#endif							/* RINGSHARD_SHMEM_AREA_H */
